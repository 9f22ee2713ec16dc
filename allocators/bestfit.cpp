// bestfit: coalescing best fit over segments that grow on demand.
//
// The textbook policy (Knuth, TAOCP vol. 1, 2.5; Wilson et al., "Dynamic Storage
// Allocation: A Survey and Critical Review", 1995, 3.3) on GPU segments: free blocks are
// indexed by (size, address); a request takes the smallest free block that fits (lowest
// address among equals), splitting off the rest; freed blocks merge with free neighbours.
// When nothing fits, a new segment is obtained from the device; when the device is full,
// wholly free segments are returned and the request retried once. Streams share one pool
// (frees arrive stream-safe from the engine). The pool is detail/coalescing_pool.h; this
// file is only the fit.
#include "allocators/detail/coalescing_pool.h"
#include "allocators/detail/pool_policy.h"
#include "allocators/detail/size_bins.h"
#include "allocators/registry.h"

namespace fraglab {

PolicyInfo policy_info_bestfit() {
  return {.name = "bestfit",
          .summary = "coalescing best fit over segments that grow on demand",
          .origin = "Knuth TAOCP 2.5; Wilson et al. 1995, \"Dynamic Storage Allocation: A Survey\"",
          .options = detail::PoolConfig::option_specs(),
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            return std::make_unique<detail::PoolPolicy<detail::BestFitIndex>>(
                ctx.device, detail::PoolConfig::from_options(ctx.options, "bestfit"));
          }};
}

}  // namespace fraglab
