// StatisticsDevice: an adaptor that counts the calls a policy makes and the physical memory they hold.
//
// RMM's statistics_resource_adaptor for the device interface: call counts by kind (failed ones
// apart), the physical bytes held now and their peak. The replay engine reports these for every
// policy (ReplayResult::calls, the reserved peak), whatever device lies below. It forwards every
// call unchanged and keeps no addresses (PhysicalMapDevice knows where memory is).
#pragma once

#include "device/forwarding_device.h"

namespace fraglab {

struct DeviceCallCounts {
  uint64_t segment_allocs = 0, segment_frees = 0, maps = 0, unmaps = 0;
  uint64_t reserves = 0, releases = 0, failed = 0;
  uint64_t aliases = 0;  // alias_pages calls (a second mapping of existing pages)
  uint64_t total() const { return segment_allocs + segment_frees + maps + unmaps + reserves + releases + aliases; }
};

class StatisticsDevice final : public ForwardingDevice {
 public:
  explicit StatisticsDevice(Device& upstream) : ForwardingDevice(upstream) {}

  const DeviceCallCounts& counts() const { return counts_; }
  // The most physical bytes held at once so far.
  uint64_t peak_reserved() const { return peak_reserved_; }

 private:
  // The calls it counts (device/forwarding_device.h forwards them).
  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override;
  void do_free_segment(Addr addr, uint64_t size) override;
  std::optional<Addr> do_reserve_range(uint64_t size) override;
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void do_unmap_pages(Addr addr, uint64_t size) override;
  void do_release_range(Addr addr, uint64_t size) override;
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override;
  // Counted here rather than asked of the upstream: one add per call, where a device's own count
  // may cost a search (and the peak needs the count after every call anyway).
  uint64_t do_reserved_bytes() const override { return reserved_; }

  void grew(uint64_t size);

  DeviceCallCounts counts_;
  uint64_t reserved_ = 0, peak_reserved_ = 0;
};

}  // namespace fraglab
