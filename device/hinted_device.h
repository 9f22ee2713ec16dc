// HintedDevice: an adaptor that hands out the addresses a recording gave.
//
// Allocators that break ties by address (PyTorch's pools order equal-sized free blocks by
// address) make different choices when their segments sit at different addresses, so a
// faithful replay must place segments where the real cudaMalloc put them. This adaptor
// answers allocate_segment with the next recorded segment_alloc address when the size
// matches, and reserve_range with the base of the next recorded expandable range (its
// first segment_map), by asking its upstream to place them there (PlacingDevice); anything
// else, and any place the upstream refuses, is the upstream's own choice. The memory is the
// upstream's either way (freed, mapped, counted there). Capacity is a LimitingDevice's over it
// (device/limiting_device.h); sim_device.h's hinted_upstream_config says which SimDevice to
// put under it.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "device/forwarding_device.h"
#include "device/placing_device.h"
#include "device/tiered_map.h"

namespace fraglab {

class HintedDevice final : public ForwardingDevice {
 public:
  // `events`: the trace (kept by reference: it must outlive the device); its SegmentAlloc and SegmentMap
  // events are the hints, found as the calls come (a replay asks for them near where it reads: no pass over
  // millions of events first). `initial`: the state at the trace's first event, whose segments come first (in
  // address order; an expandable segment's range starts at its lowest mapped range), as a policy adopting it
  // asks for them.
  HintedDevice(PlacingDevice& upstream, const std::vector<Event>& events, const InitialState* initial = nullptr);

  uint64_t hints_used() const { return hints_used_; }

 private:
  // The calls it places (device/forwarding_device.h forwards the others).
  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override;
  std::optional<Addr> do_reserve_range(uint64_t size) override;
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void do_release_range(Addr addr, uint64_t size) override;
  // Recorded ranges (PyTorch never aliases) refuse it; elsewhere it is the upstream's business.
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override;

  bool in_recorded_range(Addr addr) const;
  // The next hint of a kind, taken: the initial state's, then the events' from where the last one was found.
  std::optional<std::pair<Addr, uint64_t>> take_segment_hint();
  std::optional<Addr> take_map_hint();

  PlacingDevice& placing_;  // the upstream, which can place at an address
  const std::vector<Event>& events_;
  std::vector<std::pair<Addr, uint64_t>> initial_segments_;  // the initial state's segments (addr, size)
  std::vector<Addr> initial_maps_;                           // its expandable segments' ranges
  size_t next_initial_segment_ = 0, next_initial_map_ = 0;
  size_t next_segment_event_ = 0, next_map_event_ = 0;  // where the events' next hint is looked for
  // Just past the recorded map that the policy's latest map matched (in step with the recording): a new
  // range's hint is looked for from there, not from the map hint taken last, which may lie long before (a
  // range released, every page unmapped, and reserved again at the same base much later).
  size_t matched_map_event_ = 0;
  bool maps_in_step_ = true;  // false once a map found no recorded one ahead: the policy left the recording
  TieredMap<Addr, uint64_t> recorded_ranges_;  // ranges placed at a recorded address, live
  uint64_t hints_used_ = 0;
};

}  // namespace fraglab
