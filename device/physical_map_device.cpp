#include "device/physical_map_device.h"

#include <algorithm>

namespace fraglab {

std::optional<Addr> PhysicalMapDevice::do_allocate_segment(uint64_t size, StreamIndex stream) {
  auto addr = upstream().allocate_segment(size, stream);
  if (addr) add_physical(*addr, size);
  return addr;
}

void PhysicalMapDevice::do_free_segment(Addr addr, uint64_t size) {
  upstream().free_segment(addr, size);
  remove_physical(addr, size);
}

std::optional<Addr> PhysicalMapDevice::do_reserve_range(uint64_t size) {
  auto addr = upstream().reserve_range(size);
  if (addr) vmm_ranges_.emplace(*addr, size);
  return addr;
}

bool PhysicalMapDevice::do_map_pages(Addr addr, uint64_t size, StreamIndex stream) {
  if (is_backed(addr, 1) || is_backed(addr + size - 1, 1)) misuse("map_pages over pages already mapped");
  if (!upstream().map_pages(addr, size, stream)) return false;
  add_physical(addr, size);
  return true;
}

void PhysicalMapDevice::do_unmap_pages(Addr addr, uint64_t size) {
  bool alias = alias_covers(addr, size);
  if (!alias && !is_backed(addr, size)) misuse("unmap_pages of unmapped pages");
  upstream().unmap_pages(addr, size);
  if (alias)
    remove_alias(addr, size);
  else
    remove_physical(addr, size);
}

bool PhysicalMapDevice::do_alias_pages(Addr dst, Addr src, uint64_t size) {
  if (is_backed(dst, 1) || is_backed(dst + size - 1, 1)) misuse("alias_pages over pages already mapped");
  // Aliases show primary mappings only, which keeps for_each_physical_piece one level deep.
  // (is_backed(src, size) with the interval search done once; a segment is no map_pages.)
  auto it = physical_.upper_bound(src);
  bool backed = it != physical_.begin() && src + size <= std::prev(it)->first + std::prev(it)->second;
  if (it == physical_.begin() || !(backed || (!aliases_.empty() && alias_covers(src, size))) ||
      !in_a_range(std::prev(it)->first))
    misuse("alias_pages of pages not mapped by map_pages");
  if (!upstream().alias_pages(dst, src, size)) return false;
  aliases_.emplace(dst, AliasRun{size, src});
  return true;
}

void PhysicalMapDevice::do_release_range(Addr addr, uint64_t size) {
  auto it = physical_.lower_bound(addr);
  auto alias = aliases_.lower_bound(addr);
  if ((it != physical_.end() && it->first < addr + size) || (alias != aliases_.end() && alias->first < addr + size))
    misuse("release_range with pages still mapped");
  upstream().release_range(addr, size);
  vmm_ranges_.erase(addr);
}

bool PhysicalMapDevice::alias_covers(Addr addr, uint64_t size) const {
  auto it = aliases_.upper_bound(addr);
  if (it == aliases_.begin()) return false;
  --it;
  if (addr >= it->first + it->second.size) return false;
  // Adjacent alias runs (pieces of one stitched range) cover together.
  Addr covered = it->first + it->second.size;
  while (covered < addr + size) {
    ++it;
    if (it == aliases_.end() || it->first != covered) return false;
    covered += it->second.size;
  }
  return true;
}

void PhysicalMapDevice::remove_alias(Addr addr, uint64_t size) {
  const Addr end = addr + size;
  // Collected first: erasing and inserting move the entries an iterator points at.
  std::vector<std::pair<Addr, AliasRun>> hit;
  for (auto it = std::prev(aliases_.upper_bound(addr)); it != aliases_.end() && it->first < end; ++it)
    hit.push_back(*it);
  for (const auto& [start, run] : hit) {
    aliases_.erase(start);
    if (start < addr) aliases_.emplace(start, AliasRun{addr - start, run.source});
    if (start + run.size > end) aliases_.emplace(end, AliasRun{start + run.size - end, run.source + (end - start)});
  }
}

bool PhysicalMapDevice::is_backed(Addr addr, uint64_t size) const {
  auto it = physical_.upper_bound(addr);
  if (it != physical_.begin()) {
    --it;
    if (addr >= it->first && addr + size <= it->first + it->second) return true;
  }
  return !aliases_.empty() && alias_covers(addr, size);
}

// Strictly inside a reserved range: where two mapped pieces may meet.
bool PhysicalMapDevice::inside_one_range(Addr at) const {
  auto it = vmm_ranges_.lower_bound(at);
  if (it == vmm_ranges_.begin()) return false;
  --it;
  return it->first < at && at < it->first + it->second;
}

bool PhysicalMapDevice::in_a_range(Addr addr) const {
  auto it = vmm_ranges_.upper_bound(addr);
  return it != vmm_ranges_.begin() && addr < std::prev(it)->first + std::prev(it)->second;
}

// Pieces that touch merge only inside one reserved range (pages mapped side by side are one span
// there). Segments never merge: the driver may place them back to back (device/cuda_address_space.h),
// yet no block can span two cudaMalloc allocations, nor two reserved ranges.
void PhysicalMapDevice::add_physical(Addr addr, uint64_t size) {
  auto next = physical_.lower_bound(addr);
  if (next != physical_.end() && next->first == addr + size && inside_one_range(addr + size)) {
    size += next->second;
    journal(next->first, next->second, true);
    next = physical_.erase(next);
  }
  if (next != physical_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == addr && inside_one_range(addr)) {
      journal(prev->first, prev->second, true);
      prev->second += size;
      return;
    }
  }
  journal(addr, 0, false);
  physical_.emplace_hint(next, addr, size);
}

void PhysicalMapDevice::remove_physical(Addr addr, uint64_t size) {
  auto it = physical_.upper_bound(addr);
  if (it == physical_.begin()) misuse("freeing memory not held");
  --it;
  const Addr start = it->first;
  const uint64_t total = it->second;
  if (addr < start || addr + size > start + total) misuse("freeing memory not held");
  const Addr end = addr + size;
  PhysicalRanges::iterator after;
  journal(start, total, true);
  if (addr > start) {
    it->second = addr - start;  // the head stays where it is
    after = std::next(it);
  } else {
    after = physical_.erase(it);
  }
  if (end < start + total) {
    journal(end, 0, false);
    physical_.emplace_hint(after, end, start + total - end);
  }
}

void PhysicalMapDevice::mark() {
  journaling_ = true;
  journal_.clear();
}

void PhysicalMapDevice::journal_slow(Addr key, uint64_t before, bool existed) {
  journal_.push_back({key, before, existed});
  // Building the marked ranges costs a pass over the map: paid once the journal is as long.
  if (journal_.size() > physical_.size() + 64) build_marked();
}

// The ranges at the mark: the map now, each journaled key back at its first journaled value.
void PhysicalMapDevice::build_marked() {
  std::vector<JournalEntry> first = std::move(journal_);
  journal_.clear();
  journaling_ = false;
  std::stable_sort(first.begin(), first.end(),
                   [](const JournalEntry& a, const JournalEntry& b) { return a.key < b.key; });
  first.erase(std::unique(first.begin(), first.end(),
                          [](const JournalEntry& a, const JournalEntry& b) { return a.key == b.key; }),
              first.end());
  marked_.clear();
  marked_.reserve(physical_.size() + first.size());
  auto j = first.begin();
  for (const auto& [addr, size] : physical_) {
    for (; j != first.end() && j->key < addr; ++j)
      if (j->existed) marked_.emplace_back(j->key, j->before);
    if (j != first.end() && j->key == addr) {
      if (j->existed) marked_.emplace_back(addr, j->before);
      ++j;
    } else {
      marked_.emplace_back(addr, size);
    }
  }
  for (; j != first.end(); ++j)
    if (j->existed) marked_.emplace_back(j->key, j->before);
}

const std::vector<std::pair<Addr, uint64_t>>& PhysicalMapDevice::physical_at_mark() {
  if (journaling_) build_marked();
  return marked_;
}

std::vector<DeviceRegion> PhysicalMapDevice::regions() const {
  std::vector<DeviceRegion> out;
  auto v = vmm_ranges_.begin();
  auto add_ranges_before = [&](Addr limit) {
    for (; v != vmm_ranges_.end() && v->first < limit; ++v) out.push_back({v->first, v->second, true});
  };
  for (const auto& [addr, size] : physical_) {
    if (in_a_range(addr)) continue;  // mapped pages: their range is listed
    add_ranges_before(addr);
    out.push_back({addr, size, false});
  }
  for (; v != vmm_ranges_.end(); ++v) out.push_back({v->first, v->second, true});
  return out;
}

}  // namespace fraglab
