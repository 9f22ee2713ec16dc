// TrackingDevice: an adaptor that observes every call a policy makes to a device.
//
// It is how the engine, not the policy, knows what device memory exists: the physical
// ranges (segments and mapped pages), the reserved address ranges, call counts, the
// reserved peak, and optionally the ordered log of calls that `fraglab fidelity`
// compares with the recording allocator's own. It forwards every call unchanged.
#pragma once

#include <algorithm>
#include <map>
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

struct DeviceCallCounts {
  uint64_t segment_allocs = 0, segment_frees = 0, maps = 0, unmaps = 0;
  uint64_t reserves = 0, releases = 0, failed = 0;
  uint64_t aliases = 0;  // alias_pages calls (a second mapping of existing pages)
  uint64_t total() const { return segment_allocs + segment_frees + maps + unmaps + reserves + releases + aliases; }
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

 private:
  // The Device interface (device/device.h); its public calls check the arguments first.
  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override;
  void do_free_segment(Addr addr, uint64_t size) override;
  uint64_t do_granularity() const override { return upstream_.granularity(); }
  std::optional<Addr> do_reserve_range(uint64_t size) override;
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void do_unmap_pages(Addr addr, uint64_t size) override;
  void do_release_range(Addr addr, uint64_t size) override;
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override;
  uint64_t do_reserved_bytes() const override { return reserved_; }
  std::optional<uint64_t> do_capacity() const override { return upstream_.capacity(); }

 public:
  uint64_t peak_reserved() const { return peak_reserved_; }
  const DeviceCallCounts& counts() const { return counts_; }

  // Physical memory: merged [addr, addr+size) intervals, address-ordered. Pages mapped a
  // second time by alias_pages are not in it (they would count twice): see aliases().
  const std::map<Addr, uint64_t>& physical() const { return physical_; }
  // True when [addr, addr+size) lies wholly inside one physical interval, or wholly inside
  // one alias mapping.
  bool is_backed(Addr addr, uint64_t size) const;
  // Alias mappings: start -> (size, the physical() address they show again).
  struct AliasRun {
    uint64_t size;
    Addr source;
  };
  const std::map<Addr, AliasRun>& aliases() const { return aliases_; }
  // Calls visit(addr, size) for the pieces of physical() memory behind [addr, addr+size):
  // the range itself, or, inside alias mappings, the pages they show.
  template <class Visit>
  void for_each_physical_piece(Addr addr, uint64_t size, Visit&& visit) const;
  // Segments and reserved ranges, address-ordered (for block maps).
  std::vector<DeviceRegion> regions() const;

  void set_event_index(uint64_t index) { event_index_ = index; }
  void enable_call_log(bool on) { log_calls_ = on; }
  const std::vector<DeviceCall>& call_log() const { return call_log_; }

 private:
  void add_physical(Addr addr, uint64_t size);
  bool inside_one_range(Addr at) const;
  void remove_physical(Addr addr, uint64_t size);
  void log(EventKind kind, Addr addr, uint64_t size);
  void grew(uint64_t size);
  bool alias_covers(Addr addr, uint64_t size) const;
  void remove_alias(Addr addr, uint64_t size);

  Device& upstream_;
  uint64_t reserved_ = 0, peak_reserved_ = 0;
  DeviceCallCounts counts_;
  std::map<Addr, uint64_t> physical_;
  std::map<Addr, uint64_t> segments_;
  std::map<Addr, uint64_t> vmm_ranges_;
  std::map<Addr, AliasRun> aliases_;
  bool log_calls_ = false;
  uint64_t event_index_ = 0;
  std::vector<DeviceCall> call_log_;
};

template <class Visit>
void TrackingDevice::for_each_physical_piece(Addr addr, uint64_t size, Visit&& visit) const {
  if (aliases_.empty() || !alias_covers(addr, 1)) {
    visit(addr, size);
    return;
  }
  auto it = std::prev(aliases_.upper_bound(addr));
  Addr end = addr + size;
  for (; it != aliases_.end() && it->first < end; ++it) {
    Addr from = std::max(addr, it->first);
    Addr to = std::min(end, it->first + it->second.size);
    visit(it->second.source + (from - it->first), to - from);
  }
}

}  // namespace fraglab
