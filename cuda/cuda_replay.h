// Replay on a real GPU: a trace's allocations and frees, in trace order, as real device
// memory, with per-operation host latency and the driver's view of reserved memory.
//
// Three kinds of run, chosen by the policy name:
//  - any registered policy: the very policy code the simulator runs, on a CudaDevice
//    through the same ReplayEngine (so its own count and block bookkeeping are the
//    simulator's), with the simulated prediction for the same configuration beside it;
//  - `cuda_malloc`: cudaMalloc/cudaFree per request, no policy at all;
//  - `cuda_malloc_async[:release_threshold=N]`: cudaMallocFromPoolAsync/cudaFreeAsync on a
//    fresh memory pool (the driver's own stream-ordered allocator), reporting the pool's
//    reserved and used high-water marks.
// Every run releases all memory at the end and reads free device memory again, so a
// leak (ours, a policy's or the driver's) shows as a difference.
#pragma once

#include <optional>
#include <string>

#include "cuda/cuda_device.h"
#include "cuda/latency.h"
#include "sim/replay.h"

namespace fraglab::cuda {

struct CudaReplayOptions {
  int ordinal = 0;
  std::optional<uint64_t> capacity;  // like the simulator's --capacity
  bool touch = false;                // cudaMemsetAsync every block on its stream
  OnOom on_oom = OnOom::Stop;
  bool simulate = true;  // also replay on the simulated device for the prediction
};

struct CudaReplayResult {
  std::string policy;  // as given
  std::string kind;    // "policy", "cuda_malloc" or "cuda_malloc_async"
  std::string gpu;     // the device's name
  int ordinal = 0;
  bool touched = false;
  // The engine's result with the policy's own count (for baselines: the live bytes the
  // program held, since no policy exists between it and the driver).
  ReplayResult counted;
  // The same run on the simulated device (baselines: passthrough's, for cuda_malloc).
  std::optional<ReplayResult> simulated;
  LatencySummary malloc_latency, free_latency;
  DriverMemory driver;  // cudaMemGetInfo: used_peak is the driver-measured reserved peak
  std::optional<uint64_t> pool_reserved_high, pool_used_high;  // cuda_malloc_async
  uint64_t free_before = 0, free_after = 0;  // free device bytes before the first and after the last call
  uint64_t held_at_end = 0;                  // bytes the policy still held after freeing everything and empty_cache
  double seconds = 0;                        // the replay loop's wall time
};

bool is_native_baseline(const std::string& policy_name);

// Runs one replay. Throws PolicyConfigError (bad policy text), CudaError (CUDA failures
// other than out of memory).
CudaReplayResult replay_on_cuda(const Trace& trace, const std::string& policy_text, const CudaReplayOptions& options);

}  // namespace fraglab::cuda
