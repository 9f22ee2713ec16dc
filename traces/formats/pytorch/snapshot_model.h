// What a PyTorch snapshot's import asks of a model of the recording allocator.
//
// The importer reads pools, settings windows and the program's empty_cache() calls from the history by
// rules (traces/formats/pytorch/pool_inference.h, traces/formats/pytorch/settings_inference.h); some of those readings
// are guesses only a replay of PyTorch's allocator can judge. The traces layer holds no allocator model, so the caller
// passes one in (ReadOptions::model): the import layer (import/trace_import.h) passes PyTorch's
// (sim/pool_checker.h). No process-wide state: two imports in one process may use different models,
// and one without a model (an empty SnapshotModel, or none in ReadOptions) reads by the rules alone.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

// Where a model of the recording allocator first disagreed with the recording about pools: it put a
// block elsewhere than the recording did; it returned a segment the recording kept (a segment of a pool
// still owned), in an empty_cache or in malloc's own releases (the garbage collector, the release and
// retry before a new segment, the recovery before an OOM); or it ran out of memory serving a request
// the recording served (nothing to revise: the reading is wrong somewhere the model cannot point at); or it
// served a request the recording ran out of memory on, from a cached block (ServedOom: that block's
// segment was another pool's, a MemPool's reserve say, which the request could not take).
struct PoolMisplacement {
  enum class Kind { Block, KeptSegment, Unserved, ServedOom } kind = Kind::Block;
  uint64_t ordinal;  // Block, Unserved: the how-manyth Alloc event (0-based); KeptSegment: the how-manyth
                     // event of kind `at` (for EmptyCache, of the importer's: id 0); ServedOom: of Oom events
  Addr model_addr;   // Block, ServedOom: where the model put it; KeptSegment: the segment the model released
  EventKind at = EventKind::EmptyCache;  // KeptSegment: EmptyCache, Alloc or Oom
};
// Replays the trace (pools as inferred) and reports the first misplaced block, or nothing.
using PoolChecker = std::function<std::optional<PoolMisplacement>(const Trace&)>;

// Given the trace read both ways (pools inferred for each), whether the collector's reading is the one
// (`collected`), and whether the model replays the reading taken exactly; it may note in the collected
// reading's meta what its replay learned of the limit (TraceMeta::gpu_limit). Where neither reading is
// exact, infer_pools() reads the marks run by run (a history where the program emptied the cache at some
// runs and malloc released it at others: an inference server's empty_cache() every few requests beside
// malloc's recoveries at the GPU's limit): from the reading taken, a mark right before the model's first
// disagreement is read the other way while that moves the disagreement later (first_divergence).
struct CollectorRunReading {
  bool collected = true;
  bool exact = false;
  std::optional<uint64_t> diverged_at;  // where the reading taken first disagrees (event index), when not exact
};
using CollectorRunResolver = std::function<CollectorRunReading(const Trace& emptied, Trace& collected)>;

// A request that try_mempool_fallback served (a default-pool request at the limit, given a cached block
// of a MemPool(use_on_oom=True)) reads like a request to that pool: it landed in the pool's segment.
// The model's reader (it knows the limit and replays the allocator) says which requests
// of a trace, pools inferred, were such fallbacks: their Alloc ordinals, read then as default-pool
// requests, and the pools that opted in.
struct FallbackReading {
  std::vector<uint64_t> allocs;
  std::vector<PoolIndex> pools;
};
using FallbackReader = std::function<std::optional<FallbackReading>(const Trace&)>;

// Where a model of the recording allocator, replaying the trace as read (its recorded addresses, its
// limit), first disagrees with the recording: the event index, or nothing where it agrees throughout.
using DivergenceFinder = std::function<std::optional<uint64_t>(const Trace&)>;

// The GPUs a recording may have been made on beside the one the model assumes for it, smallest first
// (TraceMeta::gpu_total_memory): a snapshot does not record the GPU's memory, yet under expandable segments it
// decides which free block PyTorch takes (how much unmapped range follows a block). Empty where it cannot
// matter (no expandable segment) or no larger GPU is known.
using GpuTotalsToTry = std::function<std::vector<uint64_t>(const Trace&)>;

// The model's answers; an empty member skips what it judges (the rules' reading stands there).
struct SnapshotModel {
  PoolChecker find_misplacement;                // pool_inference.h, rule 7
  CollectorRunResolver resolve_collector_runs;  // pool_inference.h, kEmptyCacheOrCollector
  FallbackReader find_fallbacks;                // pool_inference.h, rule 8
  DivergenceFinder find_divergence;             // settings_inference.h, unrecorded_settings.h
  GpuTotalsToTry other_gpu_totals;              // pool_inference.h, rule 7's first round
};

}  // namespace fraglab
