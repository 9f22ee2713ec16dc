#include "traces/trace.h"

#include <algorithm>
#include <functional>

#include "traces/io/format_error.h"

namespace fraglab {

namespace {
constexpr const char* kKindNames[kEventKindCount] = {"alloc",         "free",         "empty_cache", "free_requested",
                                                     "segment_alloc", "segment_free", "segment_map", "segment_unmap",
                                                     "oom",           "pool_release"};
}

const char* event_kind_name(EventKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < kEventKindCount ? kKindNames[i] : "unknown";
}

bool parse_event_kind(const std::string& name, EventKind& kind) {
  for (int i = 0; i < kEventKindCount; ++i) {
    if (name == kKindNames[i]) {
      kind = static_cast<EventKind>(i);
      return true;
    }
  }
  return false;
}

std::string pool_name(const PoolInfo& pool) {
  if (pool.is_default()) return "default";
  if (pool.inferred()) return "inferred #" + std::to_string(pool.id[1]);
  return "(" + std::to_string(pool.id[0]) + ", " + std::to_string(pool.id[1]) + ")";
}

std::string pool_traits(const PoolInfo& pool) {
  std::string out;
  for (auto [on, name] :
       {std::pair{pool.own_allocator, "allocator"}, std::pair{pool.use_on_oom, "use_on_oom"},
        std::pair{pool.no_split, "no_split"}, std::pair{pool.empties_on_release, "emptied when deleted"}})
    if (on) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

const char* pool_origin(const PoolInfo& pool) {
  if (pool.is_default()) return "";
  if (pool.inferred()) return "told apart by the model";
  return pool.id[0] ? "graph capture" : "MemPool or graph_pool_handle";
}

StreamIndex TraceMeta::intern_stream(uint64_t handle) {
  for (size_t i = 0; i < streams.size(); ++i)
    if (streams[i] == handle) return static_cast<StreamIndex>(i);
  return append_stream(handle);
}

StreamIndex TraceMeta::append_stream(uint64_t handle) {
  // Events hold a 16-bit index: one more stream would silently wrap (70001 read as 4464).
  if (streams.size() > kMaxStreamIndex) throw TooManyStreams();
  streams.push_back(handle);
  return static_cast<StreamIndex>(streams.size() - 1);
}

size_t MemorySource::read(Event* out, size_t capacity) {
  size_t n = std::min(capacity, trace_.events.size() - pos_);
  std::copy_n(trace_.events.begin() + static_cast<ptrdiff_t>(pos_), n, out);
  pos_ += n;
  return n;
}

const Event* MemorySource::read_in_place(size_t capacity, size_t& n) {
  n = std::min(capacity, trace_.events.size() - pos_);
  const Event* at = trace_.events.data() + pos_;
  pos_ += n;
  return at;
}

AllocId IdSlots::acquire() {
  if (!free_heap_.empty()) {
    std::pop_heap(free_heap_.begin(), free_heap_.end(), std::greater<>());
    AllocId id = free_heap_.back();
    free_heap_.pop_back();
    live_[id] = true;
    return id;
  }
  live_.push_back(true);
  return static_cast<AllocId>(live_.size() - 1);
}

void IdSlots::release(AllocId id) {
  live_[id] = false;
  free_heap_.push_back(id);
  std::push_heap(free_heap_.begin(), free_heap_.end(), std::greater<>());
}

FormatError::FormatError(std::string file, Where where, uint64_t position, const std::string& what)
    : std::runtime_error([&] {
        std::string msg = printable(file);
        if (where == Where::Offset) msg += ": byte offset " + std::to_string(position);
        if (where == Where::InflatedOffset)
          msg += ": byte offset " + std::to_string(position) + " of the decompressed data";
        if (where == Where::Line) msg += ":" + std::to_string(position);
        return msg + ": " + printable(what);
      }()),
      file_(std::move(file)),
      where_(where),
      position_(position),
      detail_(what) {}

}  // namespace fraglab

namespace fraglab {

uint64_t InitialState::reserved() const {
  uint64_t bytes = 0;
  for (const RecordedSegment& s : segments) bytes += s.total_size;
  return bytes;
}

}  // namespace fraglab
