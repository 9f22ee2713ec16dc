// Stream handles -> stream indices for the readers: a hash lookup per event, and a new handle
// appended without TraceMeta::intern_stream's scan, so a trace with tens of thousands of
// streams reads in linear time. More streams than a StreamIndex holds is an error the reader
// reports at its own position (TraceMeta::append_stream throws TooManyStreams).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "traces/trace.h"

namespace fraglab {

class StreamInterner {
 public:
  explicit StreamInterner(TraceMeta& meta) : meta_(&meta) {
    for (size_t i = 0; i < meta.streams.size(); ++i) index_.emplace(meta.streams[i], static_cast<StreamIndex>(i));
  }
  StreamIndex intern(uint64_t handle) {
    if (auto it = index_.find(handle); it != index_.end()) return it->second;
    StreamIndex i = meta_->append_stream(handle);
    index_.emplace(handle, i);
    return i;
  }

 private:
  TraceMeta* meta_;
  std::unordered_map<uint64_t, StreamIndex> index_;
};

}  // namespace fraglab
