// The results of a corpus run (trace x policy configuration) and their files.
//
// Everything in results.csv and results.json is a pure function of the traces, the
// policy configurations and the capacity: integers from the replay, and ratios derived
// from them when written. So one run, or shards merged (`fraglab merge`), produce the
// same bytes, whatever the number of threads or nodes. The one measurement that is not
// reproducible, replay time, goes to timings.json beside them (and into the HTML and
// Markdown reports, which are for people, not for diffing).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fraglab {

// Reserved bytes over a replay, downsampled to at most kSeriesPoints buckets of equal
// event count; each bucket keeps its highest point, so the peak is always in the series.
constexpr size_t kSeriesPoints = 200;

struct CompareRow {
  std::string trace;                    // path as expanded
  std::string policy;                   // configuration string as given
  uint64_t events = 0;                  // replay events (alloc, free, empty_cache) replayed
  uint64_t allocs = 0;                  // of which allocations
  uint64_t live_bytes_bound = 0;        // the trace's peak live requested bytes: no policy can reserve less
  uint64_t recorded_peak_reserved = 0;  // what the recording allocator reserved at peak (0: not recorded)
  uint64_t peak_reserved = 0, peak_reserved_event = 0;
  uint64_t peak_allocated = 0;
  uint64_t free_at_peak = 0, largest_free_at_peak = 0, free_ranges_at_peak = 0;
  uint64_t segment_allocs = 0, segment_frees = 0, maps = 0, unmaps = 0, reserves = 0, releases = 0;
  uint64_t failed_device_calls = 0;
  uint64_t ooms = 0;
  std::vector<uint64_t> series_event, series_reserved;  // see kSeriesPoints
  double replay_seconds = 0;                            // not reproducible: timings.json only

  uint64_t device_calls() const { return segment_allocs + segment_frees + maps + unmaps + reserves + releases; }
  // Peak reserved over the live-bytes bound (1 = no overhead at all); 0 when the bound is 0.
  double reserved_over_bound() const;
  int64_t gap_bytes() const { return static_cast<int64_t>(peak_reserved) - static_cast<int64_t>(live_bytes_bound); }
  // 1 - largest free range / free bytes inside reserved memory at the reserved peak.
  double fragmentation_at_peak() const;
};

struct ShardId {
  int index = 1, count = 1;                       // 1-based: shard K of N
  static ShardId parse(const std::string& text);  // "K/N"; throws std::invalid_argument
};

struct CompareResults {
  std::vector<std::string> traces;    // the whole matrix's traces, sorted
  std::vector<std::string> policies;  // the whole matrix's configurations, in command order
  std::optional<uint64_t> capacity;   // simulated device capacity; nullopt = unlimited
  std::optional<ShardId> shard;       // set in a shard's results; merged and whole runs have none
  std::vector<CompareRow> rows;       // matrix order: trace-major, then policy

  // Rows by cell: entry t * policies.size() + p, nullptr where absent (a shard's results).
  std::vector<const CompareRow*> cell_table() const;
  size_t trace_index(const std::string& trace) const;    // throws std::invalid_argument
  size_t policy_index(const std::string& policy) const;  // throws std::invalid_argument
  void sort_rows();                                      // into matrix order
};

std::string results_csv(const CompareResults& r);
std::string results_json(const CompareResults& r);
std::string timings_json(const CompareResults& r);

// The largest results.json (or timings.json) read_results accepts: 512 MiB.
constexpr uint64_t kMaxResultsBytes = uint64_t{512} << 20;
// Reads results.json (and, for replay times, timings.json when `timings_path` is non-empty
// and exists). Throws FormatError naming the file on anything malformed or larger than
// kMaxResultsBytes.
CompareResults read_results(const std::string& path, const std::string& timings_path = "");

// Combines shard results into the whole matrix's: every shard must describe the same
// matrix (traces, policies, capacity, shard count), each shard index must appear once,
// and every cell must be covered exactly once. Throws std::invalid_argument otherwise.
CompareResults merge_results(std::vector<CompareResults> shards, const std::vector<std::string>& names);

}  // namespace fraglab
