// The Policy face of a CoalescingPool: the sequential-fit policies (bestfit, firstfit,
// nextfit, worstfit) differ only in their free-block index, so each is this template over
// its index plus a registry entry. BestFitIndex lives here too: slab's large pool uses it.
#pragma once

#include "allocators/detail/block_list.h"
#include "allocators/detail/coalescing_pool.h"
#include "allocators/detail/size_bins.h"
#include "allocators/policy.h"

namespace fraglab::detail {

// Free blocks ordered by (size, address): the best fit is the first at or after (size, 0).
class BestFitIndex {
 public:
  void insert(uint32_t node, const BlockNode& b) { bins_.insert(node, b.size, b.addr); }
  void erase(uint32_t, const BlockNode& b) { bins_.erase(b.size, b.addr); }
  uint32_t find(uint64_t size) const { return bins_.best_fit(size); }
  // find() and erase() in one search.
  uint32_t take(uint64_t size) { return bins_.take_best_fit(size); }

 private:
  SizeBins<BinLayout::Descending> bins_;  // fits lie at a bin's back
};
static_assert(FitIndex<BestFitIndex>);

template <FitIndex Index>
class PoolPolicy final : public Policy {
 public:
  PoolPolicy(Device& device, PoolConfig config) : pool_(device, config) {}

  std::optional<Block> allocate(const AllocRequest& req) override { return pool_.allocate(req.size, req.stream); }
  void deallocate(const Block& block) override { pool_.deallocate(static_cast<uint32_t>(block.handle)); }
  void empty_cache() override { pool_.release_free_segments(); }

 private:
  CoalescingPool<Index> pool_;
};

}  // namespace fraglab::detail
