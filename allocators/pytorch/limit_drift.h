// The limit a recording ran under, followed along it where one limit does not explain its device calls.
//
// The GPU's own limit is the GPU's memory less what everything else holds (other processes, the CUDA
// context, cuBLAS workspaces, kernels loaded lazily for new shapes), and that share grows while the job
// runs, by a few hundred KiB to tens of MiB. A memory fraction changes when the program calls
// set_per_process_memory_fraction again (raised after OOMs, say). Neither leaves an entry in the
// history; the device calls show the limit at their moment: a recorded OOM and each of malloc's
// recoveries (the cached segments it released before a retry: the request's segment had failed with the
// bytes reserved before them) bound it from above, each segment granted from below. Where those disagree
// with one limit, it is followed along the trace: a failure lowers it below what failed, a grant raises it
// to what the grant needed, and it holds until the next call says otherwise. Offsets from a base: for
// the GPU's limit the least OOM limit (reserved + free memory, which a recovery may show too high; grants
// before the driver took its memory lie above it), so that a capacity given for a what-if (a larger GPU)
// keeps the recording's drift, not its bytes; for a
// fraction the capacity, and only where no one fraction fits (all granted below all refused), so that a
// what-if fraction on a recording with one stands as given.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "allocators/pytorch/caching_allocator.h"
#include "allocators/pytorch/config.h"
#include "traces/trace.h"

namespace fraglab::detail {

// (event index from which it holds, the limit less the device's capacity): empty where one limit
// explains every device call, where no OOM was the GPU's (limit Gpu), or with the garbage collector on
// (limit Fraction: its releases depend on the limit's exact value). Expandable segments' maps under the
// GPU's limit are checked page by page: a refusal bounds the limit by the request's size in whole pages,
// an OOM by reserved + its free memory. A program's empty_cache() read as malloc's recovery brings the
// limit down to fit it: where both readings replay, the program's is taken (sim/pool_checker.cpp).
// `capacity`: the limit the replay starts from.
std::vector<std::pair<uint64_t, int64_t>> limit_drift(const std::vector<Event>& events, uint64_t initial_reserved,
                                                      const PytorchAllocatorConfig& config, PytorchLimit limit,
                                                      uint64_t capacity);

}  // namespace fraglab::detail
