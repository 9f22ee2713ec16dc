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

#include "device/device.h"

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

class CallLogDevice final : public Device {
 public:
  explicit CallLogDevice(Device& upstream) : upstream_(upstream), granularity_(upstream.granularity()) {}

  const std::vector<DeviceCall>& calls() const { return calls_; }
  std::vector<DeviceCall> take_calls() { return std::move(calls_); }

  // The event index later calls are logged under.
  void set_event_index(uint64_t index) { own_index_ = index; }
  // Logs later calls under the index `*index` holds when they are made (e.g. ReplayEngine::event_index()).
  void follow(const uint64_t& index) { index_ = &index; }

 private:
  // The Device interface (device/device.h); its public calls check the arguments first.
  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override;
  void do_free_segment(Addr addr, uint64_t size) override;
  uint64_t do_granularity() const override { return granularity_; }
  std::optional<Addr> do_reserve_range(uint64_t size) override { return upstream_.reserve_range(size); }
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void do_unmap_pages(Addr addr, uint64_t size) override;
  void do_release_range(Addr addr, uint64_t size) override { upstream_.release_range(addr, size); }
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override;
  uint64_t do_reserved_bytes() const override { return upstream_.reserved_bytes(); }
  std::optional<uint64_t> do_capacity() const override { return upstream_.capacity(); }

  void log(EventKind kind, Addr addr, uint64_t size, Addr alias_of = 0) {
    calls_.push_back({kind, addr, size, *index_, alias_of});
  }

  Device& upstream_;
  // The upstream's, which a device fixes when it is built: every layer's public calls check
  // alignment against it, and asking down the stack each time cost a virtual call per layer.
  uint64_t granularity_;
  uint64_t own_index_ = 0;
  const uint64_t* index_ = &own_index_;
  std::vector<DeviceCall> calls_;
};

}  // namespace fraglab
