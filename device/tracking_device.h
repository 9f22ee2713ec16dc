// TrackingDevice: the adaptors the replay engine watches a policy's device through, composed.
//
// A policy's calls go through a StatisticsDevice (counts, reserved bytes and their peak) and then a
// PhysicalMapDevice (where memory is) to the device below. This type only builds that stack and
// reaches its parts; the jobs are the adaptors'. The policy is given device() (or the TrackingDevice
// itself, which converts). A caller that needs the ordered call log (fidelity, export) puts a
// CallLogDevice (device/call_log_device.h) over it.
#pragma once

#include "device/physical_map_device.h"
#include "device/statistics_device.h"

namespace fraglab {

class TrackingDevice {
 public:
  explicit TrackingDevice(Device& upstream) : map_(upstream), stats_(map_) {}
  TrackingDevice(const TrackingDevice&) = delete;
  TrackingDevice& operator=(const TrackingDevice&) = delete;

  // The top of the stack: what the policy calls.
  Device& device() { return stats_; }
  const Device& device() const { return stats_; }
  operator Device&() { return stats_; }  // NOLINT(google-explicit-constructor): passed where a Device is

  const StatisticsDevice& stats() const { return stats_; }
  const PhysicalMapDevice& map() const { return map_; }

  // The parts' answers the engine and reports read most, by their names there.
  uint64_t reserved_bytes() const { return stats_.reserved_bytes(); }
  uint64_t peak_reserved() const { return stats_.peak_reserved(); }
  const DeviceCallCounts& counts() const { return stats_.counts(); }
  const PhysicalRanges& physical() const { return map_.physical(); }
  bool is_backed(Addr addr, uint64_t size) const { return map_.is_backed(addr, size); }
  const TieredMap<Addr, PhysicalMapDevice::AliasRun>& aliases() const { return map_.aliases(); }
  template <class Visit>
  void for_each_physical_piece(Addr addr, uint64_t size, Visit&& visit) const {
    map_.for_each_physical_piece(addr, size, std::forward<Visit>(visit));
  }
  std::vector<DeviceRegion> regions() const { return map_.regions(); }
  // physical() now, for later (PhysicalMapDevice::mark): the engine marks at each new reserved peak.
  void mark_physical() { map_.mark(); }
  const std::vector<std::pair<Addr, uint64_t>>& physical_at_mark() { return map_.physical_at_mark(); }

 private:
  PhysicalMapDevice map_;
  StatisticsDevice stats_;
};

}  // namespace fraglab
