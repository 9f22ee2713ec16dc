// PhysicalMapDevice: an adaptor that knows where device memory is.
//
// It is how the engine, not the policy, knows what memory exists and where: the physical ranges
// (segments and mapped pages, address-ordered, for fragmentation and block maps), the reserved
// address ranges, and the alias mappings (alias_pages) with the pages they show again. Knowing
// that, it also refuses what no device allows and a device need not check: mapping over mapped
// pages, unmapping pages that are not mapped, aliasing pages no map_pages created, releasing a
// range with pages still mapped (std::logic_error "device misuse: ..."). It forwards every call
// unchanged; counting is StatisticsDevice's job, the call log CallLogDevice's.
#pragma once

#include <algorithm>
#include <iterator>
#include <vector>

#include "device/forwarding_device.h"
#include "device/tiered_map.h"

namespace fraglab {

// Physical memory as merged [addr, addr+size) intervals, address-ordered.
using PhysicalRanges = TieredMap<Addr, uint64_t>;

// One stretch of device address space as the block map shows it.
struct DeviceRegion {
  Addr addr;
  uint64_t size;
  bool is_vmm;  // a reserved virtual range (only its mapped parts hold memory)
};

class PhysicalMapDevice final : public ForwardingDevice {
 public:
  explicit PhysicalMapDevice(Device& upstream) : ForwardingDevice(upstream) {}

  // Physical memory: merged [addr, addr+size) intervals, address-ordered. Pages mapped a second
  // time by alias_pages are not in it (they would count twice): see aliases(). Pieces that touch
  // merge only inside one reserved range; a segment is always an interval of its own.
  const PhysicalRanges& physical() const { return physical_; }
  // True when [addr, addr+size) lies wholly inside one physical interval, or wholly inside
  // one alias mapping.
  bool is_backed(Addr addr, uint64_t size) const;
  // Alias mappings: start -> (size, the physical() address they show again).
  struct AliasRun {
    uint64_t size;
    Addr source;
  };
  const TieredMap<Addr, AliasRun>& aliases() const { return aliases_; }
  // Calls visit(addr, size) for the pieces of physical() memory behind [addr, addr+size):
  // the range itself, or, inside alias mappings, the pages they show.
  template <class Visit>
  void for_each_physical_piece(Addr addr, uint64_t size, Visit&& visit) const;
  // Segments and reserved ranges, address-ordered (for block maps).
  std::vector<DeviceRegion> regions() const;

  // physical() as it is now, for later: mark() notes the moment, and physical_at_mark() gives the
  // ranges then. Between the two, each change to the ranges is journaled (the key and its value
  // before); once the journal outgrows the map, the ranges at the mark are built and the journaling
  // stops. So a caller that marks at every new reserved peak pays per change, never a copy per mark.
  void mark();
  const std::vector<std::pair<Addr, uint64_t>>& physical_at_mark();

 private:
  // The calls that change where memory is (device/forwarding_device.h forwards the others).
  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override;
  void do_free_segment(Addr addr, uint64_t size) override;
  std::optional<Addr> do_reserve_range(uint64_t size) override;
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void do_unmap_pages(Addr addr, uint64_t size) override;
  void do_release_range(Addr addr, uint64_t size) override;
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override;

  void add_physical(Addr addr, uint64_t size);
  // Before physical_[key] changes (existed: its value then; else absent then).
  void journal(Addr key, uint64_t before, bool existed) {
    if (journaling_) [[unlikely]]
      journal_slow(key, before, existed);
  }
  void journal_slow(Addr key, uint64_t before, bool existed);
  void build_marked();
  void remove_physical(Addr addr, uint64_t size);
  bool inside_one_range(Addr at) const;
  bool in_a_range(Addr addr) const;
  bool alias_covers(Addr addr, uint64_t size) const;
  void remove_alias(Addr addr, uint64_t size);

  PhysicalRanges physical_;
  // Reserved ranges. Segments need no map of their own: a physical interval outside every
  // reserved range is exactly one segment (they never merge).
  TieredMap<Addr, uint64_t> vmm_ranges_;
  TieredMap<Addr, AliasRun> aliases_;
  struct JournalEntry {
    Addr key;
    uint64_t before;
    bool existed;
  };
  bool journaling_ = false;
  std::vector<JournalEntry> journal_;
  std::vector<std::pair<Addr, uint64_t>> marked_;
};

template <class Visit>
void PhysicalMapDevice::for_each_physical_piece(Addr addr, uint64_t size, Visit&& visit) const {
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
