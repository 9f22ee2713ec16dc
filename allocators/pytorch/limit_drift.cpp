#include "allocators/pytorch/limit_drift.h"

#include <algorithm>
#include <optional>

namespace fraglab::detail {

namespace {

// What the device calls before request `at` (an Alloc or Oom event index) prove of the limit.
struct Evidence {
  uint64_t at = 0;
  uint64_t failed_below = UINT64_MAX;  // a check that needed this much in all failed
  uint64_t granted = 0;                // a check that needed this much passed
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

// The most the device was asked for to serve request `e` (an oom entry's size is round_size()'s already):
// the segment malloc asked for, or, where expandable segments map pages (`maps`), the request's size in
// whole pages (its block may reach into unmapped space: fewer pages, never more).
uint64_t request_segment(const Event& e, const PytorchAllocatorConfig& config, bool maps) {
  const uint64_t size = e.kind == EventKind::Oom ? e.size : pytorch_round_size(e.size, config);
  if (!maps) return pytorch_allocation_size(size, config.large_segment_size);
  const uint64_t page = size <= kSmallSize ? kSmallBuffer : config.large_segment_size;
  return (size + page - 1) / page * page;
}

// The GPU refuses a cudaMalloc past its limit: what was reserved once a segment was granted. A fraction is
// checked before the call, with the request's whole segment: what was reserved before the grant plus it.
// Under the GPU's limit with expandable segments (`gpu_maps`) an OOM also shows the limit itself: the pages
// the request needed were more than the free memory, so the limit was reserved + that free memory.
std::vector<Evidence> evidence(const std::vector<Event>& events, uint64_t reserved,
                               const PytorchAllocatorConfig& config, PytorchLimit limit, bool gpu_maps) {
  std::vector<Evidence> out;
  Evidence pending;
  bool in_releases = false, emptied = false, after_releases = false, granting = false;
  uint64_t reserved_before_releases = 0, reserved_before_grant = 0;
  EventKind previous = EventKind::Alloc;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    switch (e.kind) {
      case EventKind::SegmentFree:
      case EventKind::SegmentUnmap:
        if (!in_releases) reserved_before_releases = reserved, emptied = previous == EventKind::EmptyCache;
        in_releases = true;
        reserved -= std::min(reserved, e.size);
        break;
      case EventKind::SegmentAlloc:
      case EventKind::SegmentMap:
        if (!granting) reserved_before_grant = reserved, after_releases = in_releases && !emptied;
        granting = true;
        in_releases = false;
        reserved += e.size;
        break;
      case EventKind::Alloc:
      case EventKind::Oom: {
        const uint64_t segment = request_segment(e, config, gpu_maps);
        // malloc's recovery: the segment failed with the bytes reserved before the releases.
        if (after_releases) pending.failed_below = reserved_before_releases + segment;
        if (e.kind == EventKind::Oom && (limit == PytorchLimit::Fraction || pytorch_oom_was_gpus(e))) {
          pending.failed_below = std::min(pending.failed_below, reserved + segment);
          if (gpu_maps) pending.failed_below = std::min(pending.failed_below, reserved + e.addr + 1);
        }
        if (granting) pending.granted = limit == PytorchLimit::Gpu ? reserved : reserved_before_grant + segment;
        if (pending.failed_below != UINT64_MAX || pending.granted) {
          pending.at = i;
          out.push_back(pending);
        }
        pending = Evidence{};
        in_releases = after_releases = granting = false;
        break;
      }
      default:
        if (is_replay_event(e.kind)) in_releases = after_releases = granting = false;
        break;
    }
    previous = e.kind;
  }
  return out;
}

}  // namespace

std::vector<std::pair<uint64_t, int64_t>> limit_drift(const std::vector<Event>& events, uint64_t initial_reserved,
                                                      const PytorchAllocatorConfig& config, PytorchLimit limit,
                                                      uint64_t capacity) {
  std::optional<uint64_t> base;
  const bool maps = config.expandable_segments || std::any_of(events.begin(), events.end(), [](const Event& e) {
                      return e.kind == EventKind::SegmentMap;
                    });
  if (limit == PytorchLimit::Gpu) {
    base = least_oom_limit(events, initial_reserved);
  } else if (config.garbage_collection_threshold <= 0.0) {
    base = capacity;
  }
  if (!base) return {};
  const std::vector<Evidence> seen =
      evidence(events, initial_reserved, config, limit, maps && limit == PytorchLimit::Gpu);
  if (limit == PytorchLimit::Fraction) {
    // One fraction explains the recording where everything granted lies below everything refused: then
    // the capacity stands as given (a what-if's included).
    uint64_t most_granted = 0, least_refused = UINT64_MAX;
    for (const Evidence& e : seen) {
      most_granted = std::max(most_granted, e.granted);
      least_refused = std::min(least_refused, e.failed_below);
    }
    if (most_granted < least_refused) return {};
  }
  std::vector<std::pair<uint64_t, int64_t>> steps;
  uint64_t now = *base;
  for (const Evidence& e : seen) {
    uint64_t next = now;
    if (next >= e.failed_below) next = e.failed_below - 1;  // the failure first, then the retry it granted
    // Under the GPU's limit a grant may lie above the base: the driver took memory after it (the least OOM
    // limit is the last), and the model then checks the limit itself (enforces_limit).
    next = std::max(next, e.granted);
    if (next == now) continue;
    now = next;
    steps.emplace_back(e.at, static_cast<int64_t>(now) - static_cast<int64_t>(*base));
  }
  return steps;
}

}  // namespace fraglab::detail
