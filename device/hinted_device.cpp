#include "device/hinted_device.h"

#include <algorithm>

namespace fraglab {

HintedDevice::HintedDevice(PlacingDevice& upstream, const std::vector<Event>& events, const InitialState* initial)
    : ForwardingDevice(upstream), placing_(upstream) {
  if (initial) {
    // Every mapped range, in address order: a range inside a reservation already made is passed over
    // (do_reserve_range), so each reservation takes its lowest range, whichever pool it turns out to be.
    for (const RecordedSegment& s : initial->segments) {
      if (s.is_expandable)
        map_hints_.push_back(s.address);
      else
        segment_hints_.emplace_back(s.address, s.total_size);
    }
  }
  for (const Event& e : events) {
    if (e.kind == EventKind::SegmentAlloc) segment_hints_.emplace_back(e.addr, e.size);
    if (e.kind == EventKind::SegmentMap) map_hints_.push_back(e.addr);
  }
}

bool HintedDevice::in_recorded_range(Addr addr) const {
  auto it = recorded_ranges_.upper_bound(addr);
  return it != recorded_ranges_.begin() && addr < std::prev(it)->first + std::prev(it)->second;
}

std::optional<Addr> HintedDevice::do_allocate_segment(uint64_t size, StreamIndex stream) {
  if (!segment_hints_.empty()) {
    // Taken whether it is used or not: a hint of another size means the replay diverged here, and
    // the hints stay in step with the calls.
    auto [addr, recorded_size] = segment_hints_.front();
    segment_hints_.pop_front();
    if (recorded_size == size && addr != 0 && placing_.allocate_segment_at(addr, size, stream)) {
      ++hints_used_;
      return addr;
    }
  }
  return placing_.allocate_segment(size, stream);
}

std::optional<Addr> HintedDevice::do_reserve_range(uint64_t size) {
  // The next recorded map outside every recorded range known so far starts the new range.
  while (!map_hints_.empty() && in_recorded_range(map_hints_.front())) map_hints_.pop_front();
  if (!map_hints_.empty()) {
    Addr addr = map_hints_.front();
    map_hints_.pop_front();
    if (addr % granularity() == 0 && placing_.reserve_range_at(addr, size)) {
      recorded_ranges_.emplace(addr, size);
      ++hints_used_;
      return addr;
    }
  }
  return placing_.reserve_range(size);
}

void HintedDevice::do_release_range(Addr addr, uint64_t size) {
  placing_.release_range(addr, size);
  recorded_ranges_.erase(addr);
}

bool HintedDevice::do_alias_pages(Addr dst, Addr src, uint64_t size) {
  if (in_recorded_range(dst) || in_recorded_range(src)) return false;
  return placing_.alias_pages(dst, src, size);
}

}  // namespace fraglab
