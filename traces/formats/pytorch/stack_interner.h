// The stacks of a PyTorch snapshot's entries and blocks (their `frames` lists) interned into
// TraceMeta::stacks, in time and memory bounded by what the input holds (read_limits.h).
#pragma once

#include <fmt/core.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "traces/formats/pytorch/pickle_reader.h"
#include "traces/io/read_limits.h"
#include "traces/trace.h"

namespace fraglab {

// Stack interning that costs what the input holds, however often it references one object
// (an alias bomb references one 1 MB frame name thousands of times in a few KB): strings,
// frames and frames lists are each looked at once per distinct object (memo references are the
// same Value), and equal content meets in tables keyed by ids, never by copied text. Only the
// text of each distinct stack is built, within the input's expansion budget (read_limits.h).
class StackInterner {
  using Document = pickle::Document;
  using Kind = pickle::Kind;
  using Value = pickle::Value;

 public:
  StackInterner(TraceMeta& meta, uint64_t budget) : meta_(meta), budget_(budget) {}
  void attach(const Document* doc) { doc_ = doc; }

  // The stack of a frames list; `fail` reports an error at the caller's position.
  template <class Fail>
  StackId stack_of(Value frames, Fail&& fail) {
    if (frames.kind() != Kind::List || doc_->empty(frames)) return 0;
    uint32_t list = doc_->container_index(frames);
    if (auto it = stack_of_list_.find(list); it != stack_of_list_.end()) return it->second;
    StackId id = stack_of_key(key_of(frames), fail);
    stack_of_list_.emplace(list, id);
    return id;
  }

  // The frames list's content as frame ids, 4 bytes each: equal for equal stacks.
  std::string key_of(Value frames) {
    std::string key;
    key_of(frames, key);
    return key;
  }
  // The same into `key` (its buffer reused: one key a trace entry).
  void key_of(Value frames, std::string& key) {
    key.clear();
    doc_->for_each(frames, [&](Value f) { add_frame(f, key); });
  }
  // The same for a frames list's items (the fast path's, pickle::ListSink::intern_list).
  void key_of(const Value* items, size_t n, std::string& key) {
    key.clear();
    for (size_t i = 0; i < n; ++i) add_frame(items[i], key);
  }

  // The stack of a key, a new StackId the first time.
  template <class Fail>
  StackId stack_of_key(std::string key, Fail&& fail) {
    auto [it, inserted] = stack_of_key_.try_emplace(std::move(key), 0);
    if (inserted) {
      std::vector<StackFrame> stack;
      for (size_t i = 0; i < it->first.size(); i += sizeof(uint32_t)) {
        uint32_t id;
        std::memcpy(&id, it->first.data() + i, sizeof id);
        const FrameKey& k = frames_[id];
        built_ += texts_[k.name].size() + texts_[k.filename].size() + sizeof(StackFrame);
        if (built_ > budget_)
          fail(
              fmt::format("stack frames expand to more than {} bytes of text: refused as an alias bomb (one "
                          "frame referenced by many stacks); {}",
                          budget_, kRaiseLimitHint));
        stack.push_back({std::string(texts_[k.name]), std::string(texts_[k.filename]), k.line});
      }
      it->second = static_cast<StackId>(meta_.stacks.size());
      meta_.stacks.push_back(std::move(stack));
    }
    return it->second;
  }

 private:
  struct FrameKey {
    uint32_t name, filename;
    int64_t line;
    bool operator==(const FrameKey&) const = default;
  };
  struct FrameKeyHash {
    size_t operator()(const FrameKey& k) const {
      return std::hash<uint64_t>()((uint64_t{k.name} << 32 | k.filename) ^
                                   static_cast<uint64_t>(k.line) * 0x9e3779b97f4a7c15ull);
    }
  };

  void add_frame(Value f, std::string& key) {
    if (f.kind() != Kind::Dict) return;
    // A frame dict that no memo names (written inline in its entry, as fraglab's export and picklers that
    // do not memoize write it) lasts only while its entry is read: its container is reused, so it is
    // known by its content alone (its str values are spans of the input, which last).
    uint32_t id = doc_->transient(f) ? frame_of_content(f) : frame_of(f);
    key.append(reinterpret_cast<const char*>(&id), sizeof id);
  }

  uint32_t frame_of_content(Value dict) {
    FrameKey k{text_id(doc_->find(dict, "name")), text_id(doc_->find(dict, "filename")), 0};
    if (const Value* v = doc_->find(dict, "line"); v && v->is_int()) k.line = doc_->as_int(*v, "line");
    auto [it, inserted] = frame_of_key_.try_emplace(k, static_cast<uint32_t>(frames_.size()));
    if (inserted) frames_.push_back(k);
    return it->second;
  }

  // By container first: a memoized frame dict is named by every stack it is in.
  uint32_t frame_of(Value dict) {
    uint32_t index = doc_->container_index(dict);
    if (index < frame_of_dict_.size() && frame_of_dict_[index]) return frame_of_dict_[index] - 1;
    const uint32_t id = frame_of_content(dict);
    if (index >= frame_of_dict_.size()) frame_of_dict_.resize(std::max<size_t>(index + 1, 2 * frame_of_dict_.size()));
    frame_of_dict_[index] = id + 1;
    return id;
  }

  // Id of a str value's text ("" for anything else): by identity first, then by content.
  uint32_t text_id(const Value* v) {
    if (!v || !v->is_str()) return 0;
    if (auto it = text_of_value_.find(*v); it != text_of_value_.end()) return it->second;
    std::string_view text = doc_->as_str(*v, "frame text");
    auto [it, inserted] = text_of_view_.try_emplace(text, static_cast<uint32_t>(texts_.size()));
    if (inserted) texts_.push_back(text);
    text_of_value_.emplace(*v, it->second);
    return it->second;
  }
  struct ValueHash {
    size_t operator()(Value v) const {
      return std::hash<uint64_t>()(v.payload() ^ static_cast<uint64_t>(v.kind()) << 60);
    }
  };
  struct ValueEq {
    bool operator()(Value a, Value b) const { return a.same_object(b); }
  };

  const Document* doc_ = nullptr;
  TraceMeta& meta_;
  uint64_t budget_, built_ = 0;
  std::vector<std::string_view> texts_{std::string_view()};  // views into the input; 0 = ""
  std::unordered_map<Value, uint32_t, ValueHash, ValueEq> text_of_value_;
  std::unordered_map<std::string_view, uint32_t> text_of_view_{{std::string_view(), 0}};
  std::vector<FrameKey> frames_;
  std::vector<uint32_t> frame_of_dict_;  // by container index: frame id + 1 (0: not seen); one per frame reference
  std::unordered_map<FrameKey, uint32_t, FrameKeyHash> frame_of_key_;
  std::unordered_map<uint32_t, StackId> stack_of_list_;    // frames list (by identity) -> stack
  std::unordered_map<std::string, StackId> stack_of_key_;  // frame ids -> stack
};

}  // namespace fraglab
