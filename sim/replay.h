// The replay engine: drives a policy with a trace's events on a device and observes.
//
// The engine owns the truth about what is live where: it records every block the
// policy hands out (by allocation id), watches the device through a TrackingDevice,
// and derives the metrics (requested, allocated and reserved bytes after every event,
// their peaks, fragmentation at the reserved peak and at sampled points, device calls,
// out-of-memory events). It verifies every block a policy hands out, always: at least as large as
// its request (so not empty, unless the request was), inside device memory the policy holds, overlapping no live block
// (PolicyMisbehaved otherwise: a policy's bug must not turn into numbers). With check_invariants it
// also verifies after every event that frees memory that each live block still lies in mapped memory.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "allocators/policy.h"
#include "device/sim_device.h"
#include "device/tiered_map.h"
#include "device/tracking_device.h"
#include "sim/bounds.h"
#include "sim/metrics.h"

namespace fraglab {

struct PolicySpec;

// A policy handed out a block no allocator may (smaller than its request, outside the memory it holds,
// over a live block): names the policy and the event. A runtime_error: the command exits 2.
class PolicyMisbehaved : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class OnOom { Stop, Skip };

struct TimelinePoint {
  uint64_t event_index;
  int64_t time_us;
  uint64_t requested, allocated, reserved;
};

struct ReplayOptions {
  OnOom on_oom = OnOom::Stop;
  bool check_invariants = false;
  uint64_t stop_before = UINT64_MAX;  // replay events [0, stop_before) only
  uint64_t sample_every = 0;          // fragmentation sample every N events (0 = none)
  // Called after each replay event with the byte counts (timelines, plots).
  std::function<void(const TimelinePoint&)> on_event;
  // Called every 64Ki events with the number done; return false to cancel.
  std::function<bool(uint64_t)> progress;
  // The trace's bounds when the caller has them (one computation for many policies);
  // otherwise replay_simulated computes them from the in-memory trace.
  std::optional<TraceBounds> bounds;
  bool oracle_bound = true;   // compute the oracle plan when bounds are not given
  bool recorded_ooms = true;  // try each recorded `oom` request (RecordedOomOutcome)
};

struct Peak {
  uint64_t bytes = 0;
  uint64_t event_index = 0;
};

struct OomRecord {
  uint64_t event_index;
  uint64_t size;
  StreamIndex stream;
  uint64_t reserved;
  uint64_t allocated;
  bool recorded = false;  // a request the recording itself failed (its `oom` entry), failing here too
};

// A recorded OOM replayed as a what-if: the request the recording allocator could not serve, tried
// under this policy at the same point of the trace. If served, the block is given back at once: the
// program's own handling of the failure (catch, retry smaller) is what the trace goes on with.
struct RecordedOomOutcome {
  uint64_t event_index;
  uint64_t size;  // the request as the allocator saw it (PyTorch records the rounded size)
  StreamIndex stream;
  bool served;
  uint64_t reserved;   // after the attempt (with the block while it was held)
  uint64_t allocated;  // live block bytes then, the served block included
};

struct ReplayResult {
  std::string policy;  // the policy string as given
  // Where its segments went: the simulated driver's placement (Cuda, Bump) or the recording's (Recorded).
  AddressModel addresses = AddressModel::Cuda;
  uint64_t events = 0, allocs = 0, frees = 0, empty_caches = 0;
  Peak requested, allocated, reserved;  // peaks of live requested, live block and reserved bytes
  Fragmentation at_peak;                // fragmentation when reserved memory peaked
  uint64_t final_reserved = 0, final_allocated = 0, final_requested = 0;
  DeviceCallCounts calls;
  std::vector<OomRecord> ooms;  // the policy's failures: requests of the trace, and recorded OOMs it failed too
  std::vector<RecordedOomOutcome> recorded_ooms;
  size_t recorded_ooms_served() const {
    return static_cast<size_t>(std::count_if(recorded_ooms.begin(), recorded_ooms.end(),
                                             [](const RecordedOomOutcome& o) { return o.served; }));
  }
  bool stopped_on_oom = false;
  bool cancelled = false;
  std::vector<Fragmentation> samples;
  double seconds = 0;  // replay time, excluding trace loading
  // Bounds of the trace (sim/bounds.h): the peak of live requested bytes over the trace
  // (counting allocations the policy failed), and the offline oracle's reserved peak.
  uint64_t live_bytes_bound = 0;
  std::optional<uint64_t> oracle_bound;
  int64_t gap_to_live_bound() const {
    return static_cast<int64_t>(reserved.bytes) - static_cast<int64_t>(live_bytes_bound);
  }
  std::optional<int64_t> gap_to_oracle() const {
    if (!oracle_bound) return std::nullopt;
    return static_cast<int64_t>(reserved.bytes) - static_cast<int64_t>(*oracle_bound);
  }
};

class ReplayEngine {
 public:
  ReplayEngine(Policy& policy, TrackingDevice& device, ReplayOptions options);
  // How errors name the policy (its configuration as the user wrote it); "the policy" by default.
  void set_policy_name(std::string name) { policy_name_ = std::move(name); }

  // Recreates the recording allocator's state at the trace's first event (TraceMeta::initial, for
  // histories that began mid-run): a policy that models that allocator adopts it, placing the live
  // blocks where they were; for every other policy the trace's prologue (the Alloc events of those
  // blocks) is allocated like any request. run() calls it; a caller of apply() calls it first.
  void establish_initial_state(const InitialState& initial);
  // Applies one event at trace position `index`. Returns false when replay must stop.
  bool apply(const Event& e, uint64_t index);
  // Replays a whole source (up to options.stop_before).
  void run(EventSource& source);

  // Takes the state at the latest reserved peak now, if it is still deferred: before asking the
  // policy directly (a probe) for memory the engine does not see.
  void settle_peak();
  // The result so far; at_peak is settled by take_result().
  const ReplayResult& result() const { return result_; }
  ReplayResult take_result();

  // The state now: blocks by allocation id (entries with live=false are not live).
  const std::vector<BlockRecord>& blocks() const { return blocks_; }
  const TrackingDevice& device() const { return device_; }
  // The index of the event being applied (the last one after it): a CallLogDevice over the
  // engine's device follows it to tag each call with its event.
  const uint64_t& event_index() const { return event_index_; }
  Fragmentation measure(uint64_t event_index) const;
  uint64_t requested_live() const { return requested_; }
  uint64_t allocated_live() const { return allocated_; }

 private:
  bool step(const Event& e, uint64_t index);
  bool step_in_full(const Event& e, uint64_t index);
  void note_reserved(uint64_t reserved, uint64_t index);
  bool apply_replay_event(const Event& e, uint64_t index);
  bool on_alloc(const Event& e, uint64_t index);
  bool on_alloc_failed(const Event& e, uint64_t index);
  void grow_ids(AllocId id);
  void observe(const Event& e, uint64_t index, uint64_t reserved, uint64_t reserved_before);
  void on_recorded_oom(const Event& e, uint64_t index);
  void on_free(const Event& e);
  void on_free_not_live(const Event& e);
  void after_event(const Event& e, uint64_t index, uint64_t reserved_before);
  void check_new_block(const BlockRecord& b, const Event& e, uint64_t index);
  [[noreturn]] void misbehaved(const BlockRecord& b, const Event& e, uint64_t index, const std::string& what) const;
  void check_all_backed(uint64_t index) const;

  Policy& policy_;
  TrackingDevice& device_;
  ReplayOptions options_;
  uint64_t event_index_ = 0;
  std::vector<Block> adopted_;  // the prologue's blocks as the policy adopted them, by event index
  bool established_ = false;
  ReplayResult result_;
  std::vector<BlockRecord> blocks_;
  // Per allocation id, beside blocks_: its place in the live lists, and whether its alloc failed
  // under --on-oom skip (its free is skipped too). One 8-byte entry, not a vector<bool> and a
  // vector<uint32_t>: the alloc and free paths touch one cache line for both.
  struct IdState {
    uint32_t live_pos = 0;
    bool skipped = false;
  };
  std::vector<IdState> id_state_;
  // The live blocks as (address, size), unordered, with their ids: measure() reads only live
  // blocks, and a new reserved peak copies them in one move.
  std::vector<std::pair<Addr, uint64_t>> live_blocks_;
  std::vector<AllocId> live_ids_;
  // Whether anything watches every event (invariant checks, samples, a callback): one test per
  // event instead of three.
  bool observed_ = false;
  mutable std::vector<std::pair<Addr, uint64_t>> scratch_;  // measure()'s sorted blocks
  // The state at the latest reserved peak, measured once in take_result(): a trace sets hundreds of
  // peaks (a run of them while the first step grows the pool), and only the last one's fragmentation
  // is reported. A trace whose every allocation sets a new peak (a growing pool, 100k live blocks)
  // must not copy the state at each: a new peak marks the moment instead (`deferred`), and from then
  // on the live blocks added and removed are journaled, as the device journals its physical ranges
  // (PhysicalMapDevice::mark). The state at the peak is the state now less the journal, built when
  // the result is taken, or before a probe, or once a journal outgrows the state it changes: each
  // event costs a journal entry at most, and each build is paid for by as many entries.
  struct PeakState {
    bool pending = false, deferred = false, physical_deferred = false;
    uint64_t event_index = 0, allocated = 0, requested = 0;
    std::vector<std::pair<Addr, uint64_t>> blocks, physical;
    // Since the mark (deferred): live blocks added (+1) and removed (-1).
    struct Change {
      Addr addr;
      uint64_t size;
      int delta;
    };
    std::vector<Change> journal;
  } peak_;
  void remember_peak(uint64_t index);
  void journal_block(Addr addr, uint64_t size, int delta) {
    if (peak_.deferred) [[unlikely]]
      journal_block_slow(addr, size, delta);
  }
  void journal_block_slow(Addr addr, uint64_t size, int delta);
  void build_peak_blocks();
  uint64_t requested_ = 0, allocated_ = 0;
  uint64_t trace_live_ = 0;  // live requested bytes of the trace, failed allocations included
  // The live blocks by address (size, id): a new block is checked against its neighbours.
  TieredMap<Addr, std::pair<uint64_t, AllocId>> by_address_;
  std::string policy_name_ = "the policy";
};

}  // namespace fraglab
