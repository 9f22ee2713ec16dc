#include "device/hinted_device.h"

#include <algorithm>

namespace fraglab {

HintedDevice::HintedDevice(PlacingDevice& upstream, const std::vector<Event>& events, const InitialState* initial)
    : ForwardingDevice(upstream), placing_(upstream), events_(events) {
  if (initial) {
    // Every mapped range, in address order: a range inside a reservation already made is passed over
    // (do_reserve_range), so each reservation takes its lowest range, whichever pool it turns out to be.
    for (const RecordedSegment& s : initial->segments) {
      if (s.is_expandable)
        initial_maps_.push_back(s.address);
      else
        initial_segments_.emplace_back(s.address, s.total_size);
    }
  }
}

std::optional<std::pair<Addr, uint64_t>> HintedDevice::take_segment_hint() {
  if (next_initial_segment_ < initial_segments_.size()) return initial_segments_[next_initial_segment_++];
  while (next_segment_event_ < events_.size()) {
    const Event& e = events_[next_segment_event_++];
    if (e.kind == EventKind::SegmentAlloc) return std::pair{e.addr, e.size};
  }
  return std::nullopt;
}

std::optional<Addr> HintedDevice::take_map_hint() {
  if (next_initial_map_ < initial_maps_.size()) return initial_maps_[next_initial_map_++];
  while (next_map_event_ < events_.size()) {
    const Event& e = events_[next_map_event_++];
    if (e.kind == EventKind::SegmentMap) return e.addr;
  }
  return std::nullopt;
}

bool HintedDevice::in_recorded_range(Addr addr) const {
  auto it = recorded_ranges_.upper_bound(addr);
  return it != recorded_ranges_.begin() && addr < std::prev(it)->first + std::prev(it)->second;
}

std::optional<Addr> HintedDevice::do_allocate_segment(uint64_t size, StreamIndex stream) {
  // Taken whether it is used or not: a hint of another size means the replay diverged here, and
  // the hints stay in step with the calls.
  if (const auto hint = take_segment_hint()) {
    const auto [addr, recorded_size] = *hint;
    if (recorded_size == size && addr != 0 && placing_.allocate_segment_at(addr, size, stream)) {
      ++hints_used_;
      return addr;
    }
  }
  return placing_.allocate_segment(size, stream);
}

std::optional<Addr> HintedDevice::do_reserve_range(uint64_t size) {
  // The next recorded map outside every recorded range known so far starts the new range.
  next_map_event_ = std::max(next_map_event_, matched_map_event_);
  std::optional<Addr> hint = take_map_hint();
  while (hint && in_recorded_range(*hint)) hint = take_map_hint();
  if (hint) {
    const Addr addr = *hint;
    if (addr % granularity() == 0 && placing_.reserve_range_at(addr, size)) {
      recorded_ranges_.emplace(addr, size);
      ++hints_used_;
      return addr;
    }
  }
  return placing_.reserve_range(size);
}

bool HintedDevice::do_map_pages(Addr addr, uint64_t size, StreamIndex stream) {
  if (!placing_.map_pages(addr, size, stream)) return false;
  // Each scan starts where the last match ended, and a miss stops them: one pass over the events at most.
  // The initial state's ranges, mapped as a policy adopts it, are not the events' maps.
  const bool initial = std::find(initial_maps_.begin(), initial_maps_.end(), addr) != initial_maps_.end();
  if (maps_in_step_ && !initial) {
    size_t i = matched_map_event_;
    while (i < events_.size() && !(events_[i].kind == EventKind::SegmentMap && events_[i].addr == addr)) ++i;
    if (i < events_.size())
      matched_map_event_ = i + 1;
    else
      maps_in_step_ = false;
  }
  return true;
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
