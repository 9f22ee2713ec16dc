#include "device/hinted_device.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace fraglab {

SimDeviceConfig HintedDevice::upstream_config(SimDeviceConfig c) {
  c.capacity.reset();
  c.addresses = AddressModel::Bump;
  return c;
}

HintedDevice::HintedDevice(Device& upstream, const std::vector<Event>& events, const InitialState* initial)
    : upstream_(upstream) {
  if (initial) {
    std::vector<std::tuple<StreamIndex, bool, std::array<int64_t, 2>>> ranges_seen;
    for (const RecordedSegment& s : initial->segments) {
      if (!s.is_expandable) {
        segment_hints_.emplace_back(s.address, s.total_size);
        continue;
      }
      auto group = std::make_tuple(s.stream, s.small_pool, s.pool_id);
      if (std::find(ranges_seen.begin(), ranges_seen.end(), group) != ranges_seen.end()) continue;
      ranges_seen.push_back(group);
      map_hints_.push_back(s.address);
    }
  }
  for (const Event& e : events) {
    if (e.kind == EventKind::SegmentAlloc) segment_hints_.emplace_back(e.addr, e.size);
    if (e.kind == EventKind::SegmentMap) map_hints_.push_back(e.addr);
  }
}

bool HintedDevice::overlaps_local(Addr addr, uint64_t size) const {
  for (const auto* m : {&local_segments_, &local_ranges_}) {
    auto it = m->lower_bound(addr);
    if (it != m->end() && it->first < addr + size) return true;
    if (it != m->begin() && std::prev(it)->first + std::prev(it)->second > addr) return true;
  }
  return false;
}

bool HintedDevice::in_local_range(Addr addr) const {
  auto it = local_ranges_.upper_bound(addr);
  return it != local_ranges_.begin() && addr < std::prev(it)->first + std::prev(it)->second;
}

std::optional<Addr> HintedDevice::do_allocate_segment(uint64_t size, StreamIndex stream) {
  if (!segment_hints_.empty() && segment_hints_.front().second == size) {
    Addr addr = segment_hints_.front().first;
    segment_hints_.pop_front();
    if (addr != 0 && !overlaps_local(addr, size)) {
      local_segments_.emplace(addr, size);
      local_reserved_ += size;
      ++hints_used_;
      return addr;
    }
  } else if (!segment_hints_.empty()) {
    segment_hints_.pop_front();  // the replay diverged here; keep the hints in step
  }
  return upstream_.allocate_segment(size, stream);
}

void HintedDevice::do_free_segment(Addr addr, uint64_t size) {
  auto it = local_segments_.find(addr);
  if (it == local_segments_.end()) return upstream_.free_segment(addr, size);
  if (it->second != size) misuse("free_segment of an unknown segment");
  local_reserved_ -= size;
  local_segments_.erase(it);
}

std::optional<Addr> HintedDevice::do_reserve_range(uint64_t size) {
  // The next recorded map outside every range known so far starts the new range.
  while (!map_hints_.empty() && in_local_range(map_hints_.front())) map_hints_.pop_front();
  if (!map_hints_.empty() && size % granularity() == 0) {
    Addr addr = map_hints_.front();
    map_hints_.pop_front();
    if (addr % granularity() == 0 && !overlaps_local(addr, size)) {
      local_ranges_.emplace(addr, size);
      ++hints_used_;
      return addr;
    }
  }
  return upstream_.reserve_range(size);
}

bool HintedDevice::do_map_pages(Addr addr, uint64_t size, StreamIndex stream) {
  if (!in_local_range(addr)) return upstream_.map_pages(addr, size, stream);
  if (size == 0 || addr % granularity() || size % granularity() || !in_local_range(addr + size - 1))
    misuse("map_pages outside a reserved range or unaligned");
  local_reserved_ += size;
  return true;
}

void HintedDevice::do_unmap_pages(Addr addr, uint64_t size) {
  if (!in_local_range(addr)) return upstream_.unmap_pages(addr, size);
  if (size > local_reserved_) misuse("unmap_pages of more than is mapped");
  local_reserved_ -= size;
}

void HintedDevice::do_release_range(Addr addr, uint64_t size) {
  auto it = local_ranges_.find(addr);
  if (it == local_ranges_.end()) return upstream_.release_range(addr, size);
  if (it->second != size) misuse("release_range of an unknown range");
  local_ranges_.erase(it);
}

bool HintedDevice::do_alias_pages(Addr dst, Addr src, uint64_t size) {
  if (in_local_range(dst) || in_local_range(src)) return false;
  return upstream_.alias_pages(dst, src, size);
}

}  // namespace fraglab
