// HintedDevice: a simulated device that hands out the addresses a recording gave.
//
// Allocators that break ties by address (PyTorch's pools order equal-sized free blocks by
// address) make different choices when their segments sit at different addresses, so a
// faithful replay must place segments where the real cudaMalloc put them. This adaptor
// answers allocate_segment with the next recorded segment_alloc address when the size
// matches, and reserve_range with the base of the next recorded expandable range (its
// first segment_map); anything else goes to the upstream device it wraps. Capacity is a
// LimitingDevice's over it (device/limiting_device.h).
#pragma once

#include <deque>
#include <map>
#include <vector>

#include "device/sim_device.h"  // SimDeviceConfig, for upstream_config

namespace fraglab {

class HintedDevice final : public Device {
 public:
  // `events`: the trace; its SegmentAlloc and SegmentMap events are the hints. `initial`: the state at
  // the trace's first event, whose segments come first (in address order; an expandable segment's
  // range starts at its lowest mapped range), as a policy adopting it asks for them.
  HintedDevice(Device& upstream, const std::vector<Event>& events, const InitialState* initial = nullptr);

  // The SimDevice the hints' upstream should be: unlimited, and with the bump model, whatever the
  // config's: the driver's model would place segments and ranges where the recording's own lie (its
  // reserve region starts at the very address the real driver's does), and a recorded range and an
  // upstream one at one address would be confused.
  static SimDeviceConfig upstream_config(SimDeviceConfig config);

 private:
  // The Device interface (device/device.h); its public calls check the arguments first.
  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override;
  void do_free_segment(Addr addr, uint64_t size) override;
  uint64_t do_granularity() const override { return upstream_.granularity(); }
  std::optional<Addr> do_reserve_range(uint64_t size) override;
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void do_unmap_pages(Addr addr, uint64_t size) override;
  void do_release_range(Addr addr, uint64_t size) override;
  // Aliasing is the upstream's business; recorded ranges (PyTorch never aliases) refuse it.
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override;
  uint64_t do_reserved_bytes() const override { return upstream_.reserved_bytes() + local_reserved_; }
  std::optional<uint64_t> do_capacity() const override { return upstream_.capacity(); }

 public:
  uint64_t hints_used() const { return hints_used_; }

 private:
  bool overlaps_local(Addr addr, uint64_t size) const;
  bool in_local_range(Addr addr) const;

  Device& upstream_;
  std::deque<std::pair<Addr, uint64_t>> segment_hints_;  // recorded segment_alloc (addr, size), in order
  std::deque<Addr> map_hints_;                           // recorded segment_map addresses, in order
  std::map<Addr, uint64_t> local_segments_, local_ranges_;
  uint64_t local_reserved_ = 0;
  uint64_t hints_used_ = 0;
};

}  // namespace fraglab
