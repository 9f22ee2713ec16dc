// The allocators people use when they use none of ours: cudaMalloc/cudaFree per request,
// and the driver's stream-ordered pool allocator (cudaMallocAsync). They bypass the
// device interface on purpose (a pool allocator is not something a policy could be
// built on), so they have their own replay loop here instead of a registry entry.
#pragma once

#include "allocators/registry.h"
#include "cuda/cuda_replay.h"

namespace fraglab::cuda {

CudaReplayResult replay_cuda_malloc(const Trace& trace, const PolicySpec& spec, const CudaReplayOptions& options);
CudaReplayResult replay_cuda_malloc_async(const Trace& trace, const PolicySpec& spec, const CudaReplayOptions& options);

}  // namespace fraglab::cuda
