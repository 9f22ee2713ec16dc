// TrackingDevice: an adaptor that observes every call a policy makes to a device.
//
// It is how the engine, not the policy, knows what device memory exists: the physical
// ranges (segments and mapped pages), the reserved address ranges, call counts, the
// reserved peak, and optionally the ordered log of calls that `fraglab fidelity`
// compares with the recording allocator's own. It forwards every call unchanged.
#pragma once

#include <map>
#include <vector>

#include "sim/device.h"

namespace fraglab {

struct DeviceCall {
  EventKind kind;  // SegmentAlloc, SegmentFree, SegmentMap or SegmentUnmap
  Addr addr;
  uint64_t size;
  uint64_t event_index;  // the trace event during whose replay the call was made
};

struct DeviceCallCounts {
  uint64_t segment_allocs = 0, segment_frees = 0, maps = 0, unmaps = 0;
  uint64_t reserves = 0, releases = 0, failed = 0;
  uint64_t total() const { return segment_allocs + segment_frees + maps + unmaps + reserves + releases; }
};

// One stretch of device address space as the block map shows it.
struct DeviceRegion {
  Addr addr;
  uint64_t size;
  bool is_vmm;  // a reserved virtual range (only its mapped parts hold memory)
};

class TrackingDevice final : public Device {
 public:
  explicit TrackingDevice(Device& upstream) : upstream_(upstream) {}

  std::optional<Addr> allocate_segment(uint64_t size, StreamIndex stream) override;
  void free_segment(Addr addr, uint64_t size) override;
  uint64_t granularity() const override { return upstream_.granularity(); }
  std::optional<Addr> reserve_range(uint64_t size) override;
  bool map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void unmap_pages(Addr addr, uint64_t size) override;
  void release_range(Addr addr, uint64_t size) override;
  uint64_t reserved_bytes() const override { return reserved_; }
  std::optional<uint64_t> capacity() const override { return upstream_.capacity(); }

  uint64_t peak_reserved() const { return peak_reserved_; }
  const DeviceCallCounts& counts() const { return counts_; }

  // Physical memory: merged [addr, addr+size) intervals, address-ordered.
  const std::map<Addr, uint64_t>& physical() const { return physical_; }
  // True when [addr, addr+size) lies wholly inside one physical interval.
  bool is_backed(Addr addr, uint64_t size) const;
  // Segments and reserved ranges, address-ordered (for block maps).
  std::vector<DeviceRegion> regions() const;

  void set_event_index(uint64_t index) { event_index_ = index; }
  void enable_call_log(bool on) { log_calls_ = on; }
  const std::vector<DeviceCall>& call_log() const { return call_log_; }

 private:
  void add_physical(Addr addr, uint64_t size);
  void remove_physical(Addr addr, uint64_t size);
  void log(EventKind kind, Addr addr, uint64_t size);
  void grew(uint64_t size);

  Device& upstream_;
  uint64_t reserved_ = 0, peak_reserved_ = 0;
  DeviceCallCounts counts_;
  std::map<Addr, uint64_t> physical_;
  std::map<Addr, uint64_t> segments_;
  std::map<Addr, uint64_t> vmm_ranges_;
  bool log_calls_ = false;
  uint64_t event_index_ = 0;
  std::vector<DeviceCall> call_log_;
};

}  // namespace fraglab
