// Fragmentation metrics of one moment of a replay: what the free space inside
// reserved memory looks like.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "device/physical_map_device.h"
#include "traces/trace.h"

namespace fraglab {

// The block an allocation (an Event::id) was given, kept by the replay engine in a table by
// id: `live` until the allocation is freed, after which the record stays, marked not live,
// until the id is allocated again.
struct BlockRecord {
  Addr addr = 0;
  uint64_t size = 0;         // block bytes
  uint64_t requested = 0;    // what the program asked for
  uint64_t handle = 0;       // the policy's
  uint64_t alloc_index = 0;  // event index of the alloc (the allocation's identity)
  StreamIndex stream = 0;
  bool live = false;
};

struct Fragmentation {
  uint64_t event_index = 0;
  uint64_t reserved = 0;      // physical bytes the device holds for the policy
  uint64_t allocated = 0;     // live block bytes
  uint64_t requested = 0;     // live requested bytes
  uint64_t free_bytes = 0;    // reserved - allocated
  uint64_t largest_free = 0;  // largest contiguous free range inside physical memory
  uint64_t free_ranges = 0;   // number of free ranges
  // 1 - largest_free / free_bytes: 0 when the free space is one piece (or none).
  double external() const {
    return free_bytes ? 1.0 - static_cast<double>(largest_free) / static_cast<double>(free_bytes) : 0.0;
  }
};

// Computes the metrics from physical memory and the live blocks. (Physical memory as a
// PhysicalMapDevice keeps it, or as a std::map for a recording's segments.)
Fragmentation measure_fragmentation(const std::map<Addr, uint64_t>& physical, const std::vector<BlockRecord>& live,
                                    uint64_t event_index);
Fragmentation measure_fragmentation(const PhysicalRanges& physical, const std::vector<BlockRecord>& live,
                                    uint64_t event_index);

// The same from the live (address, size) blocks in any order (sorted here, in place) and
// physical intervals in address order, with the block and requested byte sums the caller
// keeps (the replay engine's fast path).
Fragmentation measure_fragmentation_unsorted(const std::map<Addr, uint64_t>& physical,
                                             std::vector<std::pair<Addr, uint64_t>>& blocks, uint64_t allocated,
                                             uint64_t requested, uint64_t event_index);
Fragmentation measure_fragmentation_unsorted(const PhysicalRanges& physical,
                                             std::vector<std::pair<Addr, uint64_t>>& blocks, uint64_t allocated,
                                             uint64_t requested, uint64_t event_index);
Fragmentation measure_fragmentation_unsorted(const std::vector<std::pair<Addr, uint64_t>>& physical,
                                             std::vector<std::pair<Addr, uint64_t>>& blocks, uint64_t allocated,
                                             uint64_t requested, uint64_t event_index);

// Sizes of the free ranges (for histograms), in address order.
std::vector<uint64_t> free_range_sizes(const std::map<Addr, uint64_t>& physical, const std::vector<BlockRecord>& live);
std::vector<uint64_t> free_range_sizes(const PhysicalRanges& physical, const std::vector<BlockRecord>& live);
// The same from physical intervals and live (address, size) blocks, both in address order.
std::vector<uint64_t> free_range_sizes(const std::vector<std::pair<Addr, uint64_t>>& physical,
                                       const std::vector<std::pair<Addr, uint64_t>>& sorted_blocks);

}  // namespace fraglab
