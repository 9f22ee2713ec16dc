#include "allocators/pytorch/gpu_memory.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace fraglab::detail {

uint64_t gpu_total_memory_at_least(uint64_t bound) {
  for (uint64_t total : kKnownGpuTotals)
    if (total >= bound) return total;
  constexpr uint64_t GiB = uint64_t{1} << 30;
  return (bound + GiB - 1) / GiB * GiB;
}

namespace {

struct MappedRange {
  Addr addr;
  uint64_t size;
};

// Whether segments of ranges sized for a GPU of `total` bytes hold every map, in the order made. Each range
// is taken at its shortest, the small pool's (2 MiB pages; the large pool's round up to 20): which pool a
// range serves is not recorded, and the driver may place the next range right after one (a CUDA-graph
// recording's ranges, H100, ascend 4 MiB apart), so a longer guess would take the next range's first map
// for one running past the end.
bool ranges_hold(const std::vector<MappedRange>& maps, uint64_t total) {
  const uint64_t shortest = expandable_range_size(total, kSmallBuffer);
  std::map<Addr, uint64_t> ranges;  // base -> size
  for (const MappedRange& m : maps) {
    auto above = ranges.upper_bound(m.addr);
    if (above != ranges.begin()) {
      const auto [base, size] = *std::prev(above);
      if (m.addr < base + size) {
        if (m.addr + m.size > base + size) return false;  // runs past its range's end
        continue;
      }
    }
    ranges.emplace(m.addr, shortest);
  }
  return true;
}

}  // namespace

uint64_t gpu_total_memory_for_maps(const std::vector<Event>& events, const InitialState& initial, uint64_t least) {
  std::vector<MappedRange> maps;
  for (const RecordedSegment& s : initial.segments)
    if (s.is_expandable) maps.push_back({s.address, s.total_size});
  // The initial state's ranges in address order (as an adopting model asks for them), then the events'.
  std::sort(maps.begin(), maps.end(), [](const MappedRange& a, const MappedRange& b) { return a.addr < b.addr; });
  for (const Event& e : events)
    if (e.kind == EventKind::SegmentMap) maps.push_back({e.addr, e.size});
  if (maps.empty()) return least;
  for (uint64_t total : kKnownGpuTotals)
    if (total >= least && ranges_hold(maps, total)) return total;
  return std::max(least, std::end(kKnownGpuTotals)[-1]);
}

uint64_t gpu_total_memory_for(const std::vector<Event>* events, const TraceMeta& meta, uint64_t least) {
  if (meta.gpu_total_memory) return std::max(least, meta.gpu_total_memory);
  return events ? gpu_total_memory_for_maps(*events, meta.initial, least) : least;
}

}  // namespace fraglab::detail
