// Allocator-settings search: which PYTORCH_CUDA_ALLOC_CONF gives this job the lowest peak
// reserved memory?
//
// Every candidate is a complete setting (keys not named are at the allocator's defaults,
// whatever the trace recorded) replayed through the policy on the simulated device. An
// exhaustive grid over PyTorch's knobs is hundreds of replays, so the search is pruned in
// three stages, each run in parallel:
//   1. sweep: every value of each knob alone (the others unset), plus the recorded setting;
//   2. combine: the cartesian product of the best few values of each knob (distinct
//      outcomes only: a value that changes nothing is not combined);
//   3. refine: coordinate descent from the best so far, each knob through all its values,
//      until no single change improves (interactions the product missed).
// Candidates are ordered by (recorded OOMs still failing, ran out of memory, peak reserved, device
// calls, number of keys set): for a job that hit OOMs, the setting that would have served most of
// them; then the lowest peak that fits, and the simplest setting among equals. Without --capacity
// an OOM'd recording is searched under the limit inferred from its oom entries (sim/capacity.h). Results are
// cached by setting, so no setting is replayed twice.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/stepped_replay.h"
#include "traces/trace_io.h"

namespace fraglab {

struct TuneDimension {
  std::string key;                  // e.g. "max_split_size_mb"
  std::vector<std::string> values;  // "" = unset (the allocator's default)
};

// PyTorch's knobs: expandable_segments, max_split_size_mb, roundup_power2_divisions (scalar and
// list forms) and, only with a capacity (it acts relative to the memory fraction), the
// garbage_collection_threshold.
std::vector<TuneDimension> pytorch_search_space(bool with_capacity);

struct TuneCandidate {
  std::string conf;   // "key:value,key:value" ("" = every default)
  std::string stage;  // "recorded", "given", "sweep", "combine" or "refine": where it was first tried
  uint64_t peak_reserved = 0, peak_allocated = 0, device_calls = 0;
  uint64_t ooms = 0;                                     // the trace's requests this setting failed
  uint64_t recorded_ooms = 0, recorded_ooms_served = 0;  // the recording's OOMs, and how many this setting serves
  uint64_t recorded_ooms_failed() const { return recorded_ooms - recorded_ooms_served; }
  double seconds = 0;
  bool fails() const { return ooms > 0 || recorded_ooms_failed() > 0; }
  size_t keys_set() const;
};

struct TuneOptions {
  std::string policy = "pytorch";
  std::vector<TuneDimension> space;  // empty: pytorch_search_space
  std::optional<uint64_t> capacity;
  std::vector<std::string> also;  // settings to try besides the search (e.g. the ones in use), ranked with the rest
  unsigned jobs = 0;              // threads; 0 = every core
  size_t keep_per_dimension = 3;  // values of each knob carried into the product
};

struct TuneReport {
  std::string trace, policy;
  uint64_t events = 0, live_bytes_bound = 0, recorded_peak_reserved = 0;
  std::string recorded_conf;            // the trace's PYTORCH_CUDA_ALLOC_CONF, "" when none recorded
  bool recorded_conf_inferred = false;  // the snapshot recorded none: read from the recording (TraceMeta)
  std::optional<uint64_t> capacity;
  std::string capacity_note;  // how the capacity was inferred, when it was
  // When even the best setting fails a recorded OOM: by how much the live bytes at that OOM (the
  // request included) exceed the capacity, the largest over the recorded OOMs (0: they fit in bytes);
  // where they fit at every one, the least room they leave (what fragmentation and rounding must not eat).
  uint64_t oom_live_excess = 0;
  uint64_t oom_live_room = 0;
  TuneCandidate recorded;              // the recorded setting, replayed
  std::vector<TuneCandidate> ranking;  // every setting tried, best first
  size_t search_space_size = 0;        // settings an exhaustive grid would replay
  double seconds = 0;                  // wall time of the search, loading excluded
  unsigned threads = 1;

  const TuneCandidate& best() const { return ranking.front(); }
  bool fits() const;  // best has no OOM and (with a capacity) peak reserved within it
};

// The policy string for a setting: "pytorch" or "pytorch:expandable_segments:True,...".
std::string policy_string(const std::string& policy, const std::string& conf);

// Loads `trace_path` and searches. Throws FormatError / PolicyConfigError on bad input.
// `trace_device`: a snapshot's device (default: the one with data, so a DDP rank's snapshot is its own GPU).
TuneReport tune(const std::string& trace_path, const TuneOptions& options, int trace_device = kAnyDevice);
// The same on a trace already loaded (`name` labels it in the report).
TuneReport tune(Trace trace, const std::string& name, const TuneOptions& options);

}  // namespace fraglab
