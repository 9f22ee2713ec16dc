// The memory limit a recording ran under, inferred from its `oom` entries when the user gives no
// --capacity: the question "would another setting have fit?" needs the limit the job hit.
//
// PyTorch records, for each failed request, the request (rounded) and the device's free memory
// (cudaMemGetInfo). Two kinds of limit explain a failure:
//  - a memory fraction (set_per_process_memory_fraction(F)): alloc_block refuses when the reserved
//    bytes plus the segment it would create pass F x the device's memory, though the GPU has room
//    (the recorded free memory exceeds the segment). Every successful device call and every failure
//    bound the limit from below and above; the fraction with the fewest decimals whose limit
//    ((size_t)(F * total memory), as setMemoryFraction computes it) lies in those bounds is taken.
//  - the device itself: cudaMalloc failed, so the limit is what the process held plus what was
//    free: reserved + device_free at the failure. No fraction was set: the pytorch policy reads such a
//    trace's capacity as the GPU's (its option limit=auto; allocators/pytorch.cpp).
// Garbage collection (garbage_collection_threshold, active only under a memory fraction) shows a limit
// without any OOM: its releases before a new segment bound it from above, loosely, and which blocks it
// frees depends on the exact limit, so capacity_for replays the model under each fraction in the bounds
// and takes the one that reproduces the recorded device calls. Where none does and the retries fit a
// limit of the GPU's own (no fraction: the collector never runs, and an expandable segment is refused
// only the pages it maps), that reading is replayed too: a job near the GPU's memory whose cudaMalloc
// failed and whose retries all succeeded shows no OOM to say so. The GPU's limit is the least its OOMs
// show; where the driver's own memory grew along the run, the pytorch model follows the limit the device
// calls show at each request below that (allocators/pytorch/limit_drift.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "allocators/pytorch/caching_allocator.h"
#include "allocators/pytorch/gpu_memory.h"
#include "traces/trace.h"

namespace fraglab {

struct InferredCapacity {
  uint64_t bytes = 0;          // the capacity to replay with
  uint64_t low = 0, high = 0;  // every capacity in [low, high] is consistent with the recording
  // The upper bound if no collector ran (the GPU's own limit): below the reserved bytes before each
  // release-and-retry run plus what its retry then obtained.
  uint64_t gpu_high = UINT64_MAX;
  // The lower bound if the limit is the GPU's own: the most the recording ever reserved (with no fraction
  // nothing checks a request's whole segment before an expandable segment maps its pages).
  uint64_t gpu_low = 0;
  // No OOM and no collector, only malloc's release-and-retry runs: a limit that capacity_for replays before
  // taking it (the GPU's own at gpu_low).
  bool retries_only = false;
  std::optional<double> fraction;  // F, when the limit is set_per_process_memory_fraction(F) of total_memory
  bool device_limit = false;       // the GPU itself ran out (reserved + device_free), or only its limit
                                   // reproduces the retries (capacity_for)
  size_t ooms = 0;
  size_t gc_runs = 0;  // release runs before a new segment with garbage collection on
  // The collector's runs bound the limit inconsistently (some run read as the collector's was the program's
  // empty_cache() before a new segment): [low, high] is then the loosest bound any of them allows, and a
  // fraction in it is at best a starting point for reading the runs one by one (capacity_for says so).
  bool loose = false;
  uint64_t loose_high = 0;  // the largest of the collector runs' bounds
  // No one limit fits the recording (high < low) and its OOMs show there was one: it changed along the run
  // (set_per_process_memory_fraction called again); `bytes` is the most it needed.
  bool changed = false;
  // The GPU's memory the fraction is of: infer_capacity's total_memory, unless an OOM shows more (the
  // driver's free memory then plus the bytes reserved: a larger GPU, gpu_total_memory_at_least).
  uint64_t total_memory = detail::kH100TotalMemory;
  std::string describe() const;
};

// The GPUs whose memory fraction a recording may have set, by what torch.cuda.get_device_properties()
// reports as total_memory (measured on the device): the smallest at least `bound` bytes, else `bound`
// rounded up to a GiB (allocators/pytorch/gpu_memory.h).
using detail::gpu_total_memory_at_least;

// nullopt when the trace records no OOM. `total_memory` 0: the GPU the import told (TraceMeta::gpu_total_memory),
// else an H100's.
std::optional<InferredCapacity> infer_capacity(const Trace& trace, uint64_t total_memory = 0);

// Where the OOMs show the GPU's own limit: that limit followed along the trace as read (detail::limit_drift,
// offsets from `inferred.bytes`); empty elsewhere, or where the recorded settings do not parse.
std::vector<std::pair<uint64_t, int64_t>> gpu_limit_drift(const Trace& trace, const InferredCapacity& inferred);

// The capacity to replay a recording with: `given` (--capacity) when set; else, for a recording that ran
// under a limit (OOMs, retries, garbage collection), the one inferred, described in `note`; else none.
// `gpu_limit` (when given) is set to whether the capacity inferred is the GPU's own memory where no OOM
// says so (the pytorch policy must then replay it with limit=gpu: TraceMeta::gpu_limit carries it).
std::optional<uint64_t> capacity_for(const Trace& trace, std::optional<uint64_t> given, std::string* note = nullptr,
                                     bool* gpu_limit = nullptr);

}  // namespace fraglab
