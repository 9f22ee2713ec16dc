// worstfit: a request is carved from the largest free block.
//
// Wilson et al. 1995, "Dynamic Storage Allocation: A Survey and Critical Review", 3.3
// (and Knuth TAOCP vol. 1, 2.5, discussion of fits): taking the largest block leaves the
// largest remainder, on the theory that it stays useful; in practice it breaks up large
// free blocks quickly and fragments badly, which makes it the pessimistic end of the
// sequential fits to compare against. Ties go to the lowest address. When the largest
// free block is too small the pool grows by a segment. Free blocks are indexed by size in
// detail/size_bins.h; pool mechanics as in bestfit (detail/coalescing_pool.h).
#include "allocators/detail/coalescing_pool.h"
#include "allocators/detail/pool_policy.h"
#include "allocators/detail/size_bins.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::BinLayout;
using detail::BlockNode;
using detail::SizeBins;

class WorstFitIndex {
 public:
  void insert(uint32_t node, const BlockNode& b) { bins_.insert(node, b.size, b.addr); }
  void erase(uint32_t, const BlockNode& b) { bins_.erase(b.size, b.addr); }
  uint32_t find(uint64_t size) const {
    if (bins_.largest_size() < size) return kNoNode;
    return bins_.largest();
  }

 private:
  SizeBins<BinLayout::Ascending> bins_;  // the largest blocks lie at a bin's back
};

}  // namespace

PolicyInfo policy_info_worstfit() {
  return {.name = "worstfit",
          .summary = "coalescing worst fit: every request is carved from the largest free block",
          .origin = "Wilson et al. 1995 3.3; Knuth TAOCP 2.5",
          .options = detail::PoolConfig::option_specs(),
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            return std::make_unique<detail::PoolPolicy<WorstFitIndex>>(
                ctx.device, detail::PoolConfig::from_options(ctx.options, "worstfit"));
          }};
}

}  // namespace fraglab
