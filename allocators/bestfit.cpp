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
#include "allocators/detail/size_bins.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::BlockNode;
using detail::kNoNode;
using detail::SizeBins;

// Free blocks ordered by (size, address): the best fit is the first at or after (size, 0).
class BestFitIndex {
 public:
  void insert(uint32_t node, const BlockNode& b) { bins_.insert(node, b.size, b.addr); }
  void erase(uint32_t, const BlockNode& b) { bins_.erase(b.size, b.addr); }
  uint32_t find(uint64_t size) const {
    uint32_t node = bins_.best_fit(size);
    return node == SizeBins::kNone ? kNoNode : node;
  }

 private:
  SizeBins bins_;
};

class BestFit final : public Policy {
 public:
  BestFit(Device& device, detail::PoolConfig config) : pool_(device, config) {}

  std::optional<Block> allocate(const AllocRequest& req) override { return pool_.allocate(req.size, req.stream); }
  void deallocate(const Block& block) override { pool_.deallocate(static_cast<uint32_t>(block.handle)); }
  void empty_cache() override { pool_.release_free_segments(); }

 private:
  detail::CoalescingPool<BestFitIndex> pool_;
};

}  // namespace

PolicyInfo policy_info_bestfit() {
  return {"bestfit",
          "coalescing best fit over segments that grow on demand",
          "Knuth TAOCP 2.5; Wilson et al. 1995, \"Dynamic Storage Allocation: A Survey\"",
          detail::PoolConfig::option_specs(),
          [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            return std::make_unique<BestFit>(ctx.device, detail::PoolConfig::from_options(ctx.options, "bestfit"));
          }};
}

}  // namespace fraglab
