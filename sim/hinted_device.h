// HintedDevice: a simulated device that hands out the addresses a recording gave.
//
// Allocators that break ties by address (PyTorch's pools order equal-sized free blocks by
// address) make different choices when their segments sit at different addresses, so a
// faithful replay must place segments where the real cudaMalloc put them. This adaptor
// answers allocate_segment with the next recorded segment_alloc address when the size
// matches, and reserve_range with the base of the next recorded expandable range (its
// first segment_map); anything else goes to the upstream SimDevice (bump addresses,
// far from the recorded ones, whatever the config's address model). Capacity is enforced here over both.
#pragma once

#include <deque>
#include <map>
#include <vector>

#include "sim/sim_device.h"

namespace fraglab {

class HintedDevice final : public Device {
 public:
  // `events`: the trace; its SegmentAlloc and SegmentMap events are the hints. `initial`: the state at
  // the trace's first event, whose segments come first (in address order; an expandable segment's
  // range starts at its lowest mapped range), as a policy adopting it asks for them.
  HintedDevice(const std::vector<Event>& events, SimDeviceConfig config, const InitialState* initial = nullptr);

  std::optional<Addr> allocate_segment(uint64_t size, StreamIndex stream) override;
  void free_segment(Addr addr, uint64_t size) override;
  uint64_t granularity() const override { return upstream_.granularity(); }
  std::optional<Addr> reserve_range(uint64_t size) override;
  bool map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void unmap_pages(Addr addr, uint64_t size) override;
  void release_range(Addr addr, uint64_t size) override;
  // Aliasing is the upstream's business; recorded ranges (PyTorch never aliases) refuse it.
  bool alias_pages(Addr dst, Addr src, uint64_t size) override;
  uint64_t reserved_bytes() const override { return upstream_.reserved_bytes() + local_reserved_; }
  std::optional<uint64_t> capacity() const override { return capacity_; }

  uint64_t hints_used() const { return hints_used_; }

 private:
  bool fits(uint64_t size) const { return !capacity_ || reserved_bytes() + size <= *capacity_; }
  bool overlaps_local(Addr addr, uint64_t size) const;
  bool in_local_range(Addr addr) const;

  SimDevice upstream_;  // unlimited: capacity is checked here over both halves
  std::optional<uint64_t> capacity_;
  std::deque<std::pair<Addr, uint64_t>> segment_hints_;  // recorded segment_alloc (addr, size), in order
  std::deque<Addr> map_hints_;                           // recorded segment_map addresses, in order
  std::map<Addr, uint64_t> local_segments_, local_ranges_;
  uint64_t local_reserved_ = 0;
  uint64_t hints_used_ = 0;
};

}  // namespace fraglab
