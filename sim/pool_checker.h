// The PyTorch model as the judge of pool inference (traces/formats/pytorch/pool_inference.h, rule 7).
//
// Replays a PyTorch snapshot's trace with the `pytorch` model under its recorded settings on the
// recording's own addresses (HintedDevice), the capacity inferred from its OOMs, and reports the first
// request the model placed elsewhere than the recording did. The traces layer holds no allocator
// model, so the import layer (import/trace_import.h) passes these in (ReadOptions::model).
#pragma once

#include <optional>

#include "traces/formats/pytorch/pool_inference.h"
#include "traces/formats/pytorch/snapshot_model.h"

namespace fraglab {

std::optional<PoolMisplacement> find_pool_misplacement(const Trace& trace);
// Whether the importer's kEmptyCacheOrCollector EmptyCache events go: which reading (the program emptied
// the cache, or malloc's garbage collector released) the model reproduces (pool_checker.cpp). Sets
// collected.meta.gpu_limit where that reading's retries show the GPU's own limit.
CollectorRunReading collector_reading_is_right(const Trace& emptied, Trace& collected);
// The requests a MemPool(use_on_oom=True) served for the default pools at the limit (pool_checker.cpp).
std::optional<FallbackReading> find_fallbacks(const Trace& trace);
// fidelity's first divergence (the event index), or nothing where the model replays the trace exactly.
std::optional<uint64_t> find_divergence(const Trace& trace);
// The four above as the model a snapshot's import consults (traces/formats/pytorch/snapshot_model.h); a constant.
const SnapshotModel& pytorch_snapshot_model();

}  // namespace fraglab
