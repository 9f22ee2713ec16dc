// `fraglab diagnose`: why did an allocation fail, what pinned the free memory, and which
// allocator setting would have served it.
//
// For each OOM (recorded in the trace, or, without recorded ones, found by replaying under
// the capacity) it replays to the state just before the failing request (SteppedReplay) and
// reads the allocator's memory there (MemoryState): reserved, allocated and free bytes, the
// largest free range against the request, free bytes by segment kind, stream and pool,
// rounding waste, the segments whose free bytes would have served the request had they been
// one range, and the live blocks pinning them, attributed to call sites (or, without stacks,
// to size classes) with their ages. At a peak (no OOM) the same reading shows where the
// stranded bytes are and who pins them.
//
// The verdict is tune's search (report/tune.h), whose replays try each recorded OOM request: the
// cheapest PYTORCH_CUDA_ALLOC_CONF under which every allocation fits, or, when none does, how
// far live bytes exceed the capacity.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/batch_fit.h"
#include "report/memory_state.h"
#include "report/program_attribution.h"
#include "report/tune.h"

namespace fraglab {

// Where to look.
struct DiagnoseAt {
  enum Kind { Oom, Peak, Event } kind = Oom;
  uint64_t event = 0;                                // for Event
  static DiagnoseAt parse(const std::string& text);  // "oom", "peak" or an event index; throws std::invalid_argument
};

struct DiagnoseOptions {
  std::string policy = "pytorch";
  DiagnoseAt at;
  bool search = true;  // run tune's search for the verdict
  unsigned jobs = 0;
  size_t top = 8;  // segments and pinning groups listed per OOM
  // Probe snapshots of the same program at smaller batches (`--probe PATH@BATCH`): the verdict then
  // names the largest batch that fits (report/batch_fit.h).
  const BatchModel* probes = nullptr;
};

// The OOMs a trace recorded (EventKind::Oom): the requests its allocator could not serve.
std::vector<Probe> recorded_oom_requests(const Trace& trace);

// Bytes under one key (a segment kind, a stream, a pool, a call site).
struct ByteShare {
  std::string key;
  uint64_t bytes = 0;
  uint64_t count = 0;          // free ranges, or pinning blocks
  uint64_t largest = 0;        // largest free range, or largest pinning block
  uint64_t oldest_events = 0;  // pinning groups: events since the oldest block's allocation
  double oldest_seconds = 0;   // ... and in seconds of the trace's clock
};

// A segment whose free bytes would serve the request if they were one range.
struct PinnedSegment {
  uint32_t segment = 0;              // index into the state's segments
  std::vector<ByteShare> pinned_by;  // its live blocks grouped by site / size class, most bytes first
};

struct Diagnosis {
  enum class Source { Recorded, Replay, Peak, Event } source = Source::Recorded;
  uint64_t event_index = 0;    // the failing request's event (or the moment looked at)
  uint64_t request_bytes = 0;  // 0 at a peak
  StreamIndex stream = 0;
  bool served_in_replay =
      false;  // the policy served the request at this state (the model disagrees with the recording)
  MemoryState state;
  uint64_t rounding_waste = 0;  // allocated - requested: bytes blocks hold past their requests
  std::vector<ByteShare> free_by_kind, free_by_stream, free_by_pool;
  std::vector<PinnedSegment> could_serve;  // most free bytes first
  // Free bytes inside segments, shared among the live blocks that keep those segments from
  // being released (in proportion to their sizes), by call site or size class.
  std::vector<ByteShare> stranded_by;
  bool by_site = false;  // stranded_by/pinned_by group by call site (the trace has stacks)
  // Who holds the live memory here: by the line of the user's code, by category, by step and phase
  // (report/program_attribution.h); and where the failing request came from.
  LiveAttribution live;
  std::string request_site;
  std::vector<StackFrame> request_stack;
};

struct Verdict {
  enum class Kind { Fits, NoSettingFits, NeedsCapacity, NoOom, NotSearched } kind = Kind::NotSearched;
  std::string conf;            // Fits, NoOom: the best setting ("" = every default)
  uint64_t peak_reserved = 0;  // its predicted peak
  uint64_t recorded_setting_peak = 0;
  std::string recorded_conf;
  bool recorded_conf_inferred = false;  // the snapshot recorded no settings: these were read from it
  uint64_t needed_bytes = 0;            // NoSettingFits: the most live bytes (with the request) at an OOM
  int64_t excess_bytes = 0;             // needed - capacity
  size_t settings_tried = 0;
  std::optional<FitReport> fit;  // with probe snapshots: the largest batch that fits, per setting
  std::string text;              // one paragraph for people
};

struct DiagnoseReport {
  std::string trace, policy;
  std::optional<uint64_t> capacity;
  uint64_t live_bytes_bound = 0, recorded_peak_reserved = 0, peak_reserved = 0;
  std::string note;             // why the moments are what they are (no OOM recorded, ...)
  std::vector<Diagnosis> ooms;  // one per moment looked at (OOMs, or the peak, or the event)
  Verdict verdict;
};

// Diagnoses `trace` (named `name`). `capacity` is the device's (set_per_process_memory_fraction x
// memory); without it, recorded OOMs are read on an unlimited device and the verdict asks for one.
DiagnoseReport diagnose(const Trace& trace, const std::string& name, std::optional<uint64_t> capacity,
                        const DiagnoseOptions& options);

// The analysis of one moment: `replay` stands just before `event_index`.
Diagnosis diagnose_state(SteppedReplay& replay, const PolicySpec& spec, Diagnosis::Source source, uint64_t request,
                         StreamIndex stream, size_t top);

}  // namespace fraglab
