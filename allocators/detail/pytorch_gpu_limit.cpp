#include "allocators/detail/pytorch_gpu_limit.h"

#include <algorithm>
#include <optional>

#include "allocators/detail/pytorch_caching_allocator.h"

namespace fraglab::detail {

namespace {

// What the device calls before request `at` (an Alloc or Oom event index) prove of the limit.
struct Evidence {
  uint64_t at;
  uint64_t failed_below = UINT64_MAX;  // a cudaMalloc that asked for this much in all failed
  uint64_t granted = 0;                // a cudaMalloc granted: this much was then reserved
};

// The least OOM limit (reserved + the free memory at each OOM the GPU caused), as capacity_for takes it.
std::optional<uint64_t> least_oom_limit(const std::vector<Event>& events, uint64_t reserved) {
  std::optional<uint64_t> least;
  for (const Event& e : events) {
    if (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap) reserved += e.size;
    if (e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentUnmap) reserved -= std::min(reserved, e.size);
    if (pytorch_oom_was_gpus(e)) least = std::min(least.value_or(UINT64_MAX), reserved + e.addr);
  }
  return least;
}

std::vector<Evidence> evidence(const std::vector<Event>& events, uint64_t reserved,
                               const PytorchAllocatorConfig& config) {
  std::vector<Evidence> out;
  Evidence pending{0};
  bool in_releases = false, emptied = false, after_releases = false;
  uint64_t reserved_before_releases = 0;
  EventKind previous = EventKind::Alloc;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    switch (e.kind) {
      case EventKind::SegmentFree:
        if (!in_releases) reserved_before_releases = reserved, emptied = previous == EventKind::EmptyCache;
        in_releases = true;
        reserved -= std::min(reserved, e.size);
        break;
      case EventKind::SegmentAlloc:
        after_releases = in_releases && !emptied;
        in_releases = false;
        reserved += e.size;
        pending.granted = std::max(pending.granted, reserved);
        break;
      case EventKind::Alloc:
      case EventKind::Oom: {
        const uint64_t segment = e.kind == EventKind::Oom
                                     ? pytorch_allocation_size(e.size)  // an oom entry's size is round_size()'s
                                     : pytorch_allocation_size(pytorch_round_size(e.size, config));
        // malloc's recovery: the segment failed with the bytes reserved before the releases.
        if (after_releases) pending.failed_below = reserved_before_releases + segment;
        if (pytorch_oom_was_gpus(e)) pending.failed_below = std::min(pending.failed_below, reserved + segment);
        if (pending.failed_below != UINT64_MAX || pending.granted) {
          pending.at = i;
          out.push_back(pending);
        }
        pending = Evidence{0};
        in_releases = after_releases = false;
        break;
      }
      default:
        if (is_replay_event(e.kind)) in_releases = after_releases = false;
        break;
    }
    previous = e.kind;
  }
  return out;
}

}  // namespace

std::vector<std::pair<uint64_t, int64_t>> gpu_limit_drift(const std::vector<Event>& events, uint64_t initial_reserved,
                                                          const PytorchAllocatorConfig& config) {
  if (config.expandable_segments ||
      std::any_of(events.begin(), events.end(), [](const Event& e) { return e.kind == EventKind::SegmentMap; }))
    return {};
  const std::optional<uint64_t> base = least_oom_limit(events, initial_reserved);
  if (!base) return {};
  std::vector<std::pair<uint64_t, int64_t>> steps;
  uint64_t limit = *base;
  for (const Evidence& e : evidence(events, initial_reserved, config)) {
    uint64_t now = limit;
    if (now >= e.failed_below) now = e.failed_below - 1;  // the failure first, then the retry it granted
    now = std::min(std::max(now, e.granted), *base);  // the device refuses past the capacity anyway
    if (now == limit) continue;
    limit = now;
    steps.emplace_back(e.at, static_cast<int64_t>(limit) - static_cast<int64_t>(*base));
  }
  return steps;
}

}  // namespace fraglab::detail
