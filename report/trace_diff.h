// Two traces side by side (two runs, two steps, two ranks): what changed between them.
//
// Each trace is summarised by what it recorded (its allocator's peak reserved and device
// calls) and by a replay under one policy (the same for both), then their allocations are
// grouped by call site, size class and stream and the groups matched by key, the largest
// differences first. `fraglab diff` prints it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "device/tracking_device.h"
#include "report/alloc_groups.h"
#include "sim/metrics.h"

namespace fraglab {

struct RunSummary {
  std::string trace;
  std::string recorded_conf;  // the recording's PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF ("" when none)
  uint64_t events = 0, allocs = 0, total_requested = 0;
  uint64_t live_bytes_bound = 0, live_peak_event = 0;  // peak live requested bytes and where
  // What the recording allocator did (0 when the trace has no segment events).
  uint64_t recorded_peak_reserved = 0, recorded_device_calls = 0, recorded_ooms = 0;
  // The replay under the diff's policy, on the capacity given, else on the limit the recording shows (its
  // OOMs, as `fraglab replay` infers it; unlimited where it shows none).
  std::optional<uint64_t> capacity;
  uint64_t peak_reserved = 0, peak_reserved_event = 0, peak_allocated = 0, ooms = 0;
  Fragmentation at_peak;  // free space inside reserved memory when reserved peaked
  DeviceCallCounts calls;
  AllocBreakdown groups;
};

struct GroupDiff {
  std::string key;
  AllocGroup a, b;  // zeros where the group is absent from that trace
  int64_t delta_bytes() const { return static_cast<int64_t>(b.bytes) - static_cast<int64_t>(a.bytes); }
  int64_t delta_allocs() const { return static_cast<int64_t>(b.allocs) - static_cast<int64_t>(a.allocs); }
  int64_t delta_live_at_peak() const {
    return static_cast<int64_t>(b.live_at_peak) - static_cast<int64_t>(a.live_at_peak);
  }
};

struct TraceDiff {
  std::string policy;
  std::optional<uint64_t> capacity;  // as given (each run's own is RunSummary::capacity)
  RunSummary a, b;
  // Matched groups, largest |difference| first (live bytes at the peak, then bytes, then allocations).
  std::vector<GroupDiff> by_site, by_size_class, by_stream, by_category;
};

struct DiffOptions {
  std::string policy = "pytorch";
  std::optional<uint64_t> capacity;
};

// Loads and replays both traces. Throws FormatError / PolicyConfigError on bad input.
TraceDiff diff_traces(const std::string& a, const std::string& b, const DiffOptions& options);

// The same for traces already in memory (fraglab-gui's two traces), named for the report.
TraceDiff diff_traces(const Trace& a, const std::string& name_a, const Trace& b, const std::string& name_b,
                      const DiffOptions& options);
// One trace's side of the diff.
RunSummary summarize_run(const Trace& trace, const std::string& name, const DiffOptions& options);
// Fills the diff's matched groups from its two summaries.
void match_diff_groups(TraceDiff& d);

// The groups of two breakdowns matched by key, largest difference first.
std::vector<GroupDiff> match_groups(const std::vector<AllocGroup>& a, const std::vector<AllocGroup>& b);

}  // namespace fraglab
