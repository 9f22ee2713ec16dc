// Compile contexts (Event::compile_context) interned as readers meet them: PyTorch writes one per trace
// entry, the same few texts over and over ("N/A" where torch.compile was not running), so the last text
// is compared first and the others found by a hash lookup; each distinct text is kept once in
// TraceMeta::compile_contexts.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>

#include "traces/trace.h"

namespace fraglab {

class ContextInterner {
 public:
  // An event holds a 16-bit index; contexts past that many are not kept (counted in dropped()).
  static constexpr size_t kMaxContexts = std::numeric_limits<ContextIndex>::max();

  explicit ContextInterner(TraceMeta& meta) : meta_(meta) {
    for (size_t i = 0; i < meta.compile_contexts.size(); ++i)
      index_.emplace(meta.compile_contexts[i], static_cast<ContextIndex>(i + 1));
  }

  // The index for `text`: 0 for none ("" or PyTorch's "N/A", and past kMaxContexts).
  ContextIndex intern(std::string_view text) {
    if (same_as_last(text)) return last_;
    return intern_new(text);
  }
  uint64_t dropped() const { return dropped_; }

 private:
  // Called for each of millions of entries, nearly always with the last text again (a short one, "N/A"):
  // compared inline, a byte at a time, rather than through memcmp's call (a seventh of a no-stacks
  // snapshot's parse went to the call and its setup).
  bool same_as_last(std::string_view text) const {
    if (text.size() != last_text_.size()) return false;
    if (text.size() > 16) return text == last_text_;
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] != last_text_[i]) return false;
    return true;
  }
  ContextIndex intern_new(std::string_view text) {
    ContextIndex found = 0;
    if (!text.empty() && text != "N/A") {
      auto it = index_.find(std::string(text));
      if (it != index_.end()) {
        found = it->second;
      } else if (meta_.compile_contexts.size() < kMaxContexts) {
        meta_.compile_contexts.emplace_back(text);
        found = static_cast<ContextIndex>(meta_.compile_contexts.size());
        index_.emplace(meta_.compile_contexts.back(), found);
      } else {
        ++dropped_;
        return 0;  // not cached: each such entry is counted
      }
    }
    last_text_.assign(text);
    last_ = found;
    return found;
  }

  TraceMeta& meta_;
  std::unordered_map<std::string, ContextIndex> index_;
  std::string last_text_;
  ContextIndex last_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace fraglab
