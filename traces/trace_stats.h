// Summary statistics of a trace, independent of any policy: what `fraglab info`
// prints and the GUI's trace summary shows.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

struct Distribution {
  uint64_t count = 0;
  double min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
  // log2 buckets: bucket k counts values in [2^k, 2^(k+1)); bucket 0 also holds 0.
  std::array<uint64_t, 64> log2_buckets{};
};

struct TraceStats {
  uint64_t events = 0;
  std::array<uint64_t, kEventKindCount> by_kind{};
  uint64_t streams_used = 0;
  std::vector<uint64_t> allocs_by_pool;  // Alloc events by Event::pool (TraceMeta::pools)
  // Alloc events and their requested bytes by Event::compile_context (0: none); empty when no event has one.
  struct ContextUse {
    uint64_t allocations = 0, requested_bytes = 0;
  };
  std::vector<ContextUse> by_compile_context;
  int64_t first_time_us = 0, last_time_us = 0;
  // last - first, saturated: recorded times are not range-checked and may be hostile.
  int64_t time_span_us() const {
    int64_t d;
    return __builtin_sub_overflow(last_time_us, first_time_us, &d)
               ? (last_time_us < first_time_us ? INT64_MIN : INT64_MAX)
               : d;
  }
  uint64_t peak_live_requested = 0, peak_live_index = 0;  // the live-bytes bound
  uint64_t peak_live_count = 0;
  uint64_t total_requested = 0;
  uint64_t never_freed = 0;             // allocations live at the end
  uint64_t recorded_peak_reserved = 0;  // from the reference segment events
  Distribution sizes;                   // requested bytes per allocation
  Distribution lifetimes_events;        // alloc -> free, in events
  Distribution lifetimes_us;            // alloc -> free, in microseconds
};

// `also`, when given, sees each chunk of events as read (with the trace position of its first): a
// second pass over the same reading (traces/history_check.h) without reading the file twice.
TraceStats compute_stats(EventSource& source,
                         const std::function<void(const Event*, size_t, uint64_t)>& also = nullptr);
Distribution summarize(const std::vector<double>& values);

}  // namespace fraglab
