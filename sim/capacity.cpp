#include "sim/capacity.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "allocators/detail/pytorch_caching_allocator.h"
#include "allocators/detail/pytorch_config.h"

namespace fraglab {

namespace {

// The fraction with the fewest decimals (up to 4) whose limit falls in [low, high].
std::optional<double> simplest_fraction(uint64_t low, uint64_t high, uint64_t total) {
  for (int scale : {10, 100, 1000, 10000})
    for (int k = 1; k <= scale; ++k) {
      double f = static_cast<double>(k) / scale;
      auto limit = static_cast<uint64_t>(f * static_cast<double>(total));  // setMemoryFraction's cast
      if (limit >= low && limit <= high) return f;
    }
  return std::nullopt;
}

// The segment size malloc checked against the limit to serve the first request at or after `from`
// (get_allocation_size of round_size under the recorded settings).
uint64_t next_request_segment(const std::vector<Event>& events, size_t from,
                              const detail::PytorchAllocatorConfig& config) {
  for (size_t i = from; i < events.size(); ++i)
    if (events[i].kind == EventKind::Alloc)
      return detail::pytorch_allocation_size(detail::pytorch_round_size(events[i].size, config));
  return 0;
}

bool garbage_collection_on(const TraceMeta& meta) {
  auto it = meta.allocator_settings.find("garbage_collection_threshold");
  return it != meta.allocator_settings.end() && it->second != "0" && it->second != "0.0";
}

}  // namespace

std::optional<InferredCapacity> infer_capacity(const Trace& trace, uint64_t total_memory) {
  InferredCapacity out;
  uint64_t reserved = trace.meta.initial.reserved();
  out.low = reserved;
  out.high = UINT64_MAX;
  uint64_t device_bound = UINT64_MAX;
  // A run of segment releases that malloc follows with a new segment is its recovery after the
  // limit refused the segment (release_available_cached_blocks / release_cached_blocks, then retry),
  // unless garbage collection, which frees before any check, is on.
  const bool gc = garbage_collection_on(trace.meta);
  detail::PytorchAllocatorConfig config;
  try {
    config.apply_recorded(trace.meta.allocator_settings);
  } catch (const std::exception&) {
    // Settings that do not parse are the policy's to report, naming the trace; default rounding here.
    config = detail::PytorchAllocatorConfig{};
  }
  EventKind previous = EventKind::Alloc;
  bool limit_seen = false;
  uint64_t reserved_before_releases = 0;
  bool in_releases = false;
  const auto& events = trace.events;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    const bool release = e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentUnmap;
    if (release && !in_releases) reserved_before_releases = reserved;
    if (!release && in_releases && !gc && (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap)) {
      if (uint64_t segment = next_request_segment(events, i, config)) {
        out.high = std::min(out.high, reserved_before_releases + segment - 1);
        limit_seen = true;
      }
    }
    if (e.kind != EventKind::Oom) in_releases = release;
    switch (e.kind) {
      case EventKind::SegmentAlloc:
        reserved += e.size;
        out.low = std::max(out.low, reserved);  // reserved + the segment passed the check
        break;
      case EventKind::SegmentMap:
        // An expandable segment checks the request's segment size (not the pages it maps) once, before
        // its first map: reserved then plus that size passed.
        if (previous != EventKind::SegmentMap)
          out.low = std::max(out.low, reserved + next_request_segment(events, i, config));
        reserved += e.size;
        break;
      case EventKind::SegmentFree:
      case EventKind::SegmentUnmap:
        reserved -= std::min(reserved, e.size);
        break;
      case EventKind::Oom: {
        ++out.ooms;
        const uint64_t segment = detail::pytorch_allocation_size(e.size);  // e.size is round_size()'s
        out.high = std::min(out.high, reserved + segment - 1);
        const uint64_t device_free = e.addr;              // 0: not recorded
        if (device_free != 0 && device_free < segment) {  // the GPU had no room: cudaMalloc failed
          out.device_limit = true;
          device_bound = std::min(device_bound, reserved + device_free);
        }
        break;
      }
      default:
        break;
    }
    previous = e.kind;
  }
  // A log that records none of its allocator's device calls (an RMM log) shows no limit's bounds.
  const bool calls_recorded = !trace.meta.initial.empty() || out.low > 0;
  if ((out.ooms == 0 && !limit_seen) || !calls_recorded) return std::nullopt;
  if (out.device_limit) {
    out.bytes = device_bound;
    return out;
  }
  // Contradicting bounds: a release run was not malloc's recovery after all (an empty_cache() right
  // before an allocation, a private pool released): no limit can be told.
  if (out.high < out.low) return std::nullopt;
  out.fraction = simplest_fraction(out.low, out.high, total_memory);
  // Without a recorded OOM, only a memory fraction that fits the bounds is evidence enough.
  if (out.ooms == 0 && !out.fraction) return std::nullopt;
  out.bytes = out.fraction ? static_cast<uint64_t>(*out.fraction * static_cast<double>(total_memory))
                           : (out.high >= out.low ? out.high : out.low);
  return out;
}

std::string InferredCapacity::describe(uint64_t total_memory) const {
  if (device_limit)
    return fmt::format(
        "capacity {} bytes inferred from {} recorded OOM(s): the GPU ran out (reserved + free device "
        "memory at the failure)",
        bytes, ooms);
  if (fraction)
    return fmt::format(
        "capacity {} bytes inferred from {} recorded OOM(s) and the allocator's retries: "
        "set_per_process_memory_fraction({:g}) of {} bytes (any limit in [{}, {}] explains the "
        "recording; --capacity overrides)",
        bytes, ooms, *fraction, total_memory, low, high);
  return fmt::format(
      "capacity {} bytes inferred from {} recorded OOM(s): a limit below what the GPU had free (range "
      "[{}, {}]; --capacity overrides)",
      bytes, ooms, low, high);
}

std::optional<uint64_t> capacity_for(const Trace& trace, std::optional<uint64_t> given, std::string* note) {
  if (given) return given;
  auto inferred = infer_capacity(trace);
  if (!inferred) return std::nullopt;
  if (note) *note = inferred->describe();
  return inferred->bytes;
}

}  // namespace fraglab
