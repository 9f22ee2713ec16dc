// PerStreamKeys: one OrderedKeys (detail/ordered_keys.h) of free blocks per stream, as the
// stream-ordered pools keep them (cupy's arenas, RMM's per-stream free lists).
//
// Those models kept a std::set per stream (a heap node per free block, a pointer chase per
// level); an OrderedKeys visits keys in the same (hi, lo) order without either. But one
// holds some 35 KB of bins, and a trace may use tens of thousands of streams, each freeing
// now and then: a stream's index is handed back when it empties and the next stream to
// need one reuses it (a few are kept), so memory follows the streams holding free blocks.
#pragma once

#include <memory>
#include <vector>

#include "allocators/detail/ordered_keys.h"
#include "traces/trace.h"

namespace fraglab::detail {

template <class Key>
class PerStreamKeys {
 public:
  using Keys = OrderedKeys<Key>;

  // The stream's keys, or nullptr when it holds none.
  Keys* find(StreamIndex stream) const { return stream < by_stream_.size() ? by_stream_[stream].get() : nullptr; }

  Keys& get(StreamIndex stream) {
    if (stream >= by_stream_.size()) by_stream_.resize(stream + 1);
    auto& keys = by_stream_[stream];
    if (!keys) {
      if (spare_.empty()) {
        keys = std::make_unique<Keys>();
      } else {
        keys = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    return *keys;
  }

  // Hands the stream's index back when it holds no key.
  void release_if_empty(StreamIndex stream) {
    auto& keys = by_stream_[stream];
    if (!keys || !keys->empty()) return;
    if (spare_.size() < kSpares) spare_.push_back(std::move(keys));
    keys.reset();
  }

  // Streams that may hold keys: [0, stream_bound()).
  size_t stream_bound() const { return by_stream_.size(); }

 private:
  static constexpr size_t kSpares = 4;
  std::vector<std::unique_ptr<Keys>> by_stream_;
  std::vector<std::unique_ptr<Keys>> spare_;
};

}  // namespace fraglab::detail
