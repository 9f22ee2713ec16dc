// How a policy treats the recording allocator's private pools (CUDA graphs, torch.cuda.MemPool;
// Event::pool, traces/formats/pytorch/pool_inference.h). Chosen per policy with the option `pools`:
//   separate (default): each pool is served by its own instance of the policy on the same device, and
//     a pool's cached memory goes back to the device only after the pool is released (PoolRelease)
//     and the cache emptied. This is what a program that captures CUDA graphs needs of any allocator:
//     a graph's baked-in addresses must stay its own between replays, so its memory cannot serve
//     other requests (PyTorch's Note [Interaction with CUDA graph capture]); a MemPool is asked for
//     precisely to keep memory apart.
//   merge: every request goes to one instance, as if the program used no pools: a what-if.
// Policies that model pools themselves (`pytorch`) get the requests' pools as they are under
// `separate`; offline planners see the whole trace and always merge.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "allocators/policy.h"

namespace fraglab {

enum class PoolMode { Separate, Merge };

// Requests keep their pool; pool 0 is served by the first instance, each private pool by its own.
// `emptied_on_release`, by pool: a MemPool, whose release (its destructor) empties its cache at once.
std::unique_ptr<Policy> make_separate_pools_policy(std::function<std::unique_ptr<Policy>()> make_instance,
                                                   std::vector<bool> emptied_on_release = {});
// Requests lose their pool: one allocator for all, releases of pools ignored.
std::unique_ptr<Policy> make_merged_pools_policy(std::unique_ptr<Policy> inner);

}  // namespace fraglab
