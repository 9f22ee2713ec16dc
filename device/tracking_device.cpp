#include "device/tracking_device.h"

#include <stdexcept>

namespace fraglab {

void TrackingDevice::grew(uint64_t size) {
  reserved_ += size;
  if (reserved_ > peak_reserved_) peak_reserved_ = reserved_;
}

void TrackingDevice::log(EventKind kind, Addr addr, uint64_t size) {
  if (log_calls_) call_log_.push_back({kind, addr, size, event_index_, 0});
}

std::optional<Addr> TrackingDevice::do_allocate_segment(uint64_t size, StreamIndex stream) {
  auto addr = upstream_.allocate_segment(size, stream);
  if (!addr) {
    ++counts_.failed;
    return addr;
  }
  ++counts_.segment_allocs;
  segments_.emplace(*addr, size);
  add_physical(*addr, size);
  grew(size);
  log(EventKind::SegmentAlloc, *addr, size);
  return addr;
}

void TrackingDevice::do_free_segment(Addr addr, uint64_t size) {
  upstream_.free_segment(addr, size);
  ++counts_.segment_frees;
  segments_.erase(addr);
  remove_physical(addr, size);
  reserved_ -= size;
  log(EventKind::SegmentFree, addr, size);
}

std::optional<Addr> TrackingDevice::do_reserve_range(uint64_t size) {
  auto addr = upstream_.reserve_range(size);
  if (!addr) {
    ++counts_.failed;
    return addr;
  }
  ++counts_.reserves;
  vmm_ranges_.emplace(*addr, size);
  return addr;
}

bool TrackingDevice::do_map_pages(Addr addr, uint64_t size, StreamIndex stream) {
  if (is_backed(addr, 1) || is_backed(addr + size - 1, 1))
    throw std::logic_error("device misuse: map_pages over pages already mapped");
  if (!upstream_.map_pages(addr, size, stream)) {
    ++counts_.failed;
    return false;
  }
  ++counts_.maps;
  add_physical(addr, size);
  grew(size);
  log(EventKind::SegmentMap, addr, size);
  return true;
}

void TrackingDevice::do_unmap_pages(Addr addr, uint64_t size) {
  bool alias = alias_covers(addr, size);
  if (!alias && !is_backed(addr, size)) throw std::logic_error("device misuse: unmap_pages of unmapped pages");
  // Physical pages go only with their last mapping: the upstream device knows which did.
  uint64_t before = upstream_.reserved_bytes();
  upstream_.unmap_pages(addr, size);
  ++counts_.unmaps;
  if (alias)
    remove_alias(addr, size);
  else
    remove_physical(addr, size);
  uint64_t freed = before - upstream_.reserved_bytes();
  reserved_ -= std::min(freed, reserved_);
  log(EventKind::SegmentUnmap, addr, size);
}

bool TrackingDevice::do_alias_pages(Addr dst, Addr src, uint64_t size) {
  if (is_backed(dst, 1) || is_backed(dst + size - 1, 1))
    throw std::logic_error("device misuse: alias_pages over pages already mapped");
  // Aliases show primary mappings only, which keeps for_each_physical_piece one level deep.
  // (is_backed(src, size) with the interval search done once.)
  auto it = physical_.upper_bound(src);
  bool backed = it != physical_.begin() && src + size <= std::prev(it)->first + std::prev(it)->second;
  if (it == physical_.begin() || !(backed || (!aliases_.empty() && alias_covers(src, size))) ||
      segments_.count(std::prev(it)->first))
    throw std::logic_error("device misuse: alias_pages of pages not mapped by map_pages");
  if (!upstream_.alias_pages(dst, src, size)) {
    ++counts_.failed;
    return false;
  }
  ++counts_.aliases;
  aliases_.emplace(dst, AliasRun{size, src});
  if (log_calls_) call_log_.push_back({EventKind::SegmentMap, dst, size, event_index_, src});
  return true;
}

bool TrackingDevice::alias_covers(Addr addr, uint64_t size) const {
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

void TrackingDevice::remove_alias(Addr addr, uint64_t size) {
  Addr end = addr + size;
  auto it = std::prev(aliases_.upper_bound(addr));
  while (it != aliases_.end() && it->first < end) {
    Addr start = it->first;
    AliasRun run = it->second;
    it = aliases_.erase(it);
    if (start < addr) aliases_.emplace(start, AliasRun{addr - start, run.source});
    if (start + run.size > end) {
      aliases_.emplace(end, AliasRun{start + run.size - end, run.source + (end - start)});
      break;
    }
  }
}

void TrackingDevice::do_release_range(Addr addr, uint64_t size) {
  auto it = physical_.lower_bound(addr);
  auto alias = aliases_.lower_bound(addr);
  if ((it != physical_.end() && it->first < addr + size) || (alias != aliases_.end() && alias->first < addr + size))
    throw std::logic_error("device misuse: release_range with pages still mapped");
  upstream_.release_range(addr, size);
  ++counts_.releases;
  vmm_ranges_.erase(addr);
}

bool TrackingDevice::is_backed(Addr addr, uint64_t size) const {
  auto it = physical_.upper_bound(addr);
  if (it != physical_.begin()) {
    --it;
    if (addr >= it->first && addr + size <= it->first + it->second) return true;
  }
  return !aliases_.empty() && alias_covers(addr, size);
}

// Mapped pages merge with mapped neighbours (one VMM range grows page by page);
// cudaMalloc'd segments never touch each other, so they stay separate intervals.
bool TrackingDevice::inside_one_range(Addr at) const {
  auto it = vmm_ranges_.lower_bound(at);
  if (it == vmm_ranges_.begin()) return false;
  --it;
  return it->first < at && at < it->first + it->second;
}

// Pieces that touch merge only inside one reserved range (pages mapped side by side are one span
// there). Segments never merge: the driver may place them back to back (device/cuda_address_space.h),
// yet no block can span two cudaMalloc allocations, nor two reserved ranges.
void TrackingDevice::add_physical(Addr addr, uint64_t size) {
  auto next = physical_.lower_bound(addr);
  if (next != physical_.end() && next->first == addr + size && inside_one_range(addr + size)) {
    size += next->second;
    next = physical_.erase(next);
  }
  if (next != physical_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == addr && inside_one_range(addr)) {
      prev->second += size;
      return;
    }
  }
  physical_.emplace_hint(next, addr, size);
}

void TrackingDevice::remove_physical(Addr addr, uint64_t size) {
  auto it = physical_.upper_bound(addr);
  if (it == physical_.begin()) throw std::logic_error("device misuse: freeing memory not held");
  --it;
  Addr start = it->first;
  uint64_t total = it->second;
  if (addr < start || addr + size > start + total) throw std::logic_error("device misuse: freeing memory not held");
  // The interval's node is kept where it can be (its head stays, or it is re-keyed to the
  // tail): one unmap per free is the common case, and it should not cost a heap allocation.
  const Addr end = addr + size;
  if (addr > start) {
    it->second = addr - start;
    if (end < start + total) physical_.emplace_hint(std::next(it), end, start + total - end);
  } else if (end < start + total) {
    auto node = physical_.extract(it);
    node.key() = end;
    node.mapped() = start + total - end;
    physical_.insert(std::move(node));
  } else {
    physical_.erase(it);
  }
}

std::vector<DeviceRegion> TrackingDevice::regions() const {
  std::vector<DeviceRegion> out;
  out.reserve(segments_.size() + vmm_ranges_.size());
  auto s = segments_.begin();
  auto v = vmm_ranges_.begin();
  while (s != segments_.end() || v != vmm_ranges_.end()) {
    if (v == vmm_ranges_.end() || (s != segments_.end() && s->first < v->first)) {
      out.push_back({s->first, s->second, false});
      ++s;
    } else {
      out.push_back({v->first, v->second, true});
      ++v;
    }
  }
  return out;
}

}  // namespace fraglab
