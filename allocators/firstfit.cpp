// firstfit: coalescing address-ordered first fit over segments that grow on demand.
//
// Knuth TAOCP vol. 1, 2.5 (Algorithm A); Wilson et al. 1995, "Dynamic Storage
// Allocation: A Survey and Critical Review", 3.4: a request takes the free block of
// lowest address that is large enough, splitting off the rest; freed blocks merge with
// free neighbours. Address order (rather than LIFO) is the variant Wilson et al. found to
// fragment least, close to best fit. The linear scan of the textbook is replaced by sorted
// leaves of free blocks that each know their largest size (detail/address_fit_index.h; the
// idea of Stephenson's "Cartesian tree", 1983), which skip whole leaves too small for the
// request and find the same block. Pool mechanics as in bestfit (detail/coalescing_pool.h).
#include "allocators/detail/address_fit_index.h"
#include "allocators/detail/coalescing_pool.h"
#include "allocators/detail/pool_policy.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::AddressFitIndex;
using detail::BlockNode;

class FirstFitIndex {
 public:
  void insert(uint32_t node, const BlockNode& b) { tree_.insert(node, b.addr, b.size); }
  void erase(uint32_t node, const BlockNode&) { tree_.erase(node); }
  void replace(uint32_t old_node, uint32_t new_node, const BlockNode& b) {
    tree_.replace(old_node, new_node, b.addr, b.size);
  }
  uint32_t find(uint64_t size) const { return tree_.first_fit(size, 0); }

 private:
  AddressFitIndex tree_;
};

}  // namespace

PolicyInfo policy_info_firstfit() {
  return {.name = "firstfit",
          .summary = "coalescing address-ordered first fit over segments that grow on demand",
          .origin = "Knuth TAOCP 2.5 Algorithm A; Wilson et al. 1995 3.4; Stephenson 1983 Cartesian-tree fast fits",
          .options = detail::PoolConfig::option_specs(),
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            return std::make_unique<detail::PoolPolicy<FirstFitIndex>>(
                ctx.device, detail::PoolConfig::from_options(ctx.options, "firstfit"));
          }};
}

}  // namespace fraglab
