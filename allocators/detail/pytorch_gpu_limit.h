// The GPU's own limit along a recording that ran out of the GPU's memory (no memory fraction).
//
// Without a fraction, cudaMalloc fails when the driver has no room: the limit is the GPU's memory less
// what everything else holds (other processes, the CUDA context, cuBLAS workspaces, lazily loaded
// kernels), and that share grows while the job runs, by a few hundred KiB to tens of MiB. A recorded
// OOM shows the limit at its moment (reserved + the free memory PyTorch reports: sim/capacity.h takes
// the least as the capacity), and so does each of malloc's recoveries (the cached segments it released
// before a retry: the cudaMalloc of the request's segment had failed with the bytes reserved before
// them) and each segment the driver granted. Where those disagree with one limit, the limit is followed
// along the trace: a failure lowers it below what failed, a granted segment raises it to what was then
// reserved, and it holds until the next call says otherwise. Relative to the least OOM limit, so that a
// capacity given for a what-if (a larger GPU) keeps the recording's drift, not its bytes.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "allocators/detail/pytorch_config.h"
#include "traces/trace.h"

namespace fraglab::detail {

// (event index from which it holds, the limit less the least OOM limit): empty where one limit explains
// every device call, where no OOM was the GPU's, or for expandable segments (their maps are not followed).
std::vector<std::pair<uint64_t, int64_t>> gpu_limit_drift(const std::vector<Event>& events, uint64_t initial_reserved,
                                                          const PytorchAllocatorConfig& config);

}  // namespace fraglab::detail
