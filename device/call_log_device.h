// CallLogDevice: an adaptor that keeps the ordered log of the calls that changed device memory.
//
// `fraglab fidelity` compares it call by call with the recording allocator's own segment events,
// `fraglab export` writes it as the policy's segment events, and the GUI marks where the device
// grew; nothing else pays for it, so the replay engine's own stack (TrackingDevice) has none. Each
// entry is tagged with the event index its owner set last (set_event_index, or follow() to read the
// replay engine's). Only calls that succeeded are logged; reserving and releasing address ranges
// hold no memory and are not.
#pragma once

#include <vector>

#include "device/forwarding_device.h"

namespace fraglab {

struct DeviceCall {
  EventKind kind;  // SegmentAlloc, SegmentFree, SegmentMap or SegmentUnmap
  Addr addr;
  uint64_t size;
  uint64_t event_index;  // the trace event during whose replay the call was made
  // For a SegmentMap made by alias_pages: the address of the pages mapped again (0 otherwise).
  // The trace model has no alias event: recording allocators never alias.
  Addr alias_of = 0;
};

class CallLogDevice final : public ForwardingDevice {
 public:
  explicit CallLogDevice(Device& upstream) : ForwardingDevice(upstream) {}

  const std::vector<DeviceCall>& calls() const { return calls_; }
  std::vector<DeviceCall> take_calls() { return std::move(calls_); }

  // The event index later calls are logged under.
  void set_event_index(uint64_t index) { own_index_ = index; }
  // Logs later calls under the index `*index` holds when they are made (e.g. ReplayEngine::event_index()).
  void follow(const uint64_t& index) { index_ = &index; }

 private:
  // The calls it logs (device/forwarding_device.h forwards the others).
  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override;
  void do_free_segment(Addr addr, uint64_t size) override;
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void do_unmap_pages(Addr addr, uint64_t size) override;
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override;

  void log(EventKind kind, Addr addr, uint64_t size, Addr alias_of = 0) {
    calls_.push_back({kind, addr, size, *index_, alias_of});
  }

  uint64_t own_index_ = 0;
  const uint64_t* index_ = &own_index_;
  std::vector<DeviceCall> calls_;
};

}  // namespace fraglab
