#include "sim/metrics.h"

#include <algorithm>

namespace fraglab {

namespace {

std::vector<std::pair<Addr, uint64_t>> sorted_blocks(const std::vector<BlockRecord>& live) {
  std::vector<std::pair<Addr, uint64_t>> blocks;
  for (const auto& b : live)
    if (b.live) blocks.emplace_back(b.addr, b.size);
  std::sort(blocks.begin(), blocks.end());
  return blocks;
}

// Walks physical intervals and sorted blocks together; both are address-ordered.
template <class Physical, class Visit>
void walk_free(const Physical& physical, const std::vector<std::pair<Addr, uint64_t>>& blocks, Visit&& visit) {
  size_t b = 0;
  for (const auto& [start, size] : physical) {
    Addr end = start + size;
    while (b < blocks.size() && blocks[b].first + blocks[b].second <= start) ++b;
    Addr cursor = start;
    while (b < blocks.size() && blocks[b].first < end) {
      if (blocks[b].first > cursor) visit(cursor, blocks[b].first - cursor);
      cursor = std::max(cursor, blocks[b].first + blocks[b].second);
      ++b;
    }
    if (cursor < end) visit(cursor, end - cursor);
  }
}

}  // namespace

namespace {
template <class Physical>
Fragmentation measure_from(const Physical& physical, std::vector<std::pair<Addr, uint64_t>>& blocks, uint64_t allocated,
                           uint64_t requested, uint64_t event_index) {
  Fragmentation f;
  f.event_index = event_index;
  for (const auto& [a, s] : physical) f.reserved += s;
  f.allocated = allocated;
  f.requested = requested;
  f.free_bytes = f.reserved > f.allocated ? f.reserved - f.allocated : 0;
  if (f.free_bytes == 0) return f;  // no free space: nothing to scan (passthrough always)
  std::sort(blocks.begin(), blocks.end());
  walk_free(physical, blocks, [&](Addr, uint64_t size) {
    f.largest_free = std::max(f.largest_free, size);
    ++f.free_ranges;
  });
  return f;
}
template <class Physical>
Fragmentation measure_live(const Physical& physical, const std::vector<BlockRecord>& live, uint64_t event_index) {
  uint64_t allocated = 0, requested = 0;
  std::vector<std::pair<Addr, uint64_t>> blocks;  // sorted in measure_from, when there is free space
  for (const auto& b : live)
    if (b.live) {
      allocated += b.size;
      requested += b.requested;
      blocks.emplace_back(b.addr, b.size);
    }
  return measure_from(physical, blocks, allocated, requested, event_index);
}

template <class Physical>
std::vector<uint64_t> free_sizes(const Physical& physical, const std::vector<BlockRecord>& live) {
  std::vector<uint64_t> sizes;
  walk_free(physical, sorted_blocks(live), [&](Addr, uint64_t size) { sizes.push_back(size); });
  return sizes;
}
}  // namespace

Fragmentation measure_fragmentation(const std::map<Addr, uint64_t>& physical, const std::vector<BlockRecord>& live,
                                    uint64_t event_index) {
  return measure_live(physical, live, event_index);
}

Fragmentation measure_fragmentation(const PhysicalRanges& physical, const std::vector<BlockRecord>& live,
                                    uint64_t event_index) {
  return measure_live(physical, live, event_index);
}

Fragmentation measure_fragmentation_unsorted(const PhysicalRanges& physical,
                                             std::vector<std::pair<Addr, uint64_t>>& blocks, uint64_t allocated,
                                             uint64_t requested, uint64_t event_index) {
  return measure_from(physical, blocks, allocated, requested, event_index);
}

Fragmentation measure_fragmentation_unsorted(const std::map<Addr, uint64_t>& physical,
                                             std::vector<std::pair<Addr, uint64_t>>& blocks, uint64_t allocated,
                                             uint64_t requested, uint64_t event_index) {
  return measure_from(physical, blocks, allocated, requested, event_index);
}

Fragmentation measure_fragmentation_unsorted(const std::vector<std::pair<Addr, uint64_t>>& physical,
                                             std::vector<std::pair<Addr, uint64_t>>& blocks, uint64_t allocated,
                                             uint64_t requested, uint64_t event_index) {
  return measure_from(physical, blocks, allocated, requested, event_index);
}

std::vector<uint64_t> free_range_sizes(const std::map<Addr, uint64_t>& physical, const std::vector<BlockRecord>& live) {
  return free_sizes(physical, live);
}

std::vector<uint64_t> free_range_sizes(const PhysicalRanges& physical, const std::vector<BlockRecord>& live) {
  return free_sizes(physical, live);
}

std::vector<uint64_t> free_range_sizes(const std::vector<std::pair<Addr, uint64_t>>& physical,
                                       const std::vector<std::pair<Addr, uint64_t>>& sorted_blocks) {
  std::vector<uint64_t> sizes;
  walk_free(physical, sorted_blocks, [&](Addr, uint64_t size) { sizes.push_back(size); });
  return sizes;
}

}  // namespace fraglab
