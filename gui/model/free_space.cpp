#include "gui/model/free_space.h"

#include <algorithm>

namespace fraglab::gui {

FreeSpace measure_free_space(const std::vector<Interval>& segments, const std::vector<Interval>& physical,
                             std::vector<Interval> blocks, uint64_t allocated, uint64_t requested,
                             uint64_t event_index) {
  // Backed intervals cut at segment ends.
  std::vector<Interval> cut;
  cut.reserve(physical.size());
  size_t s = 0;
  for (const auto& [start, length] : physical) {
    Addr at = start, end = start + length;
    while (at < end) {
      while (s < segments.size() && segments[s].first + segments[s].second <= at) ++s;
      Addr stop = end;
      if (s < segments.size()) {
        Addr seg0 = segments[s].first, seg1 = seg0 + segments[s].second;
        stop = at < seg0 ? std::min(end, seg0) : std::min(end, seg1);
      }
      cut.emplace_back(at, stop - at);
      at = stop;
    }
  }
  std::sort(blocks.begin(), blocks.end());
  FreeSpace out;
  out.sizes = free_range_sizes(cut, blocks);
  out.frag = measure_fragmentation_unsorted(cut, blocks, allocated, requested, event_index);
  return out;
}

FreeSpace free_space(const CursorSnapshot& snap) {
  std::vector<Interval> segments, blocks;
  segments.reserve(snap.regions.size());
  for (const DeviceRegion& r : snap.regions) segments.emplace_back(r.addr, r.size);
  blocks.reserve(snap.blocks.size());
  uint64_t allocated = 0, requested = 0, awaiting = 0;
  for (const SnapshotBlock& b : snap.blocks) {
    blocks.emplace_back(b.addr, b.size);
    allocated += b.size;
    requested += b.requested;
    if (b.awaiting_streams) awaiting += b.size;
  }
  // Measured with every block in memory (free bytes are what no block holds), then the blocks awaiting
  // streams taken out of allocated, as PyTorch's allocated_bytes has them (requested_bytes keeps them).
  FreeSpace out =
      measure_free_space(segments, snap.physical, std::move(blocks), allocated, requested, snap.event_index);
  out.frag.allocated -= awaiting;
  out.awaiting_streams = awaiting;
  return out;
}

FreeSpace free_space(const MemoryState& st) {
  std::vector<Interval> segments, physical, blocks;
  for (const StateSegment& seg : st.segments) {
    segments.emplace_back(seg.addr, seg.size);
    std::vector<Interval> parts;
    for (uint32_t b : seg.blocks) parts.emplace_back(st.blocks[b].addr, st.blocks[b].size);
    for (const FreeRange& f : seg.free_ranges) parts.emplace_back(f.addr, f.size);
    std::sort(parts.begin(), parts.end());
    for (const auto& [addr, size] : parts) {  // adjacent parts are one backed interval
      if (!physical.empty() && physical.back().first + physical.back().second == addr)
        physical.back().second += size;
      else
        physical.emplace_back(addr, size);
    }
  }
  for (const StateBlock& b : st.blocks) blocks.emplace_back(b.addr, b.size);
  // As free_space(CursorSnapshot): blocks awaiting streams are neither free nor counted as allocated.
  FreeSpace out = measure_free_space(segments, physical, std::move(blocks), st.allocated, st.requested, st.event_index);
  out.frag.allocated -= std::min(out.frag.allocated, st.awaiting_streams);
  out.awaiting_streams = st.awaiting_streams;
  return out;
}

}  // namespace fraglab::gui
