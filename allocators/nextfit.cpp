// nextfit: first fit that resumes where the last search ended (a roving pointer).
//
// Knuth TAOCP vol. 1, 2.5, exercise 6 ("next fit"); Wilson et al. 1995, "Dynamic Storage
// Allocation: A Survey and Critical Review", 3.4: the search for a free block starts at
// the rover, the address just past the last block handed out, and wraps around to the
// lowest address when nothing at or after it fits. It spreads allocations over the whole
// pool instead of packing the low end; Wilson et al. report it fragments noticeably more
// than address-ordered first fit, which is the point of having it here to compare.
// The search uses the same address-ordered index as firstfit; pool mechanics
// as in bestfit (detail/coalescing_pool.h).
#include "allocators/detail/address_fit_index.h"
#include "allocators/detail/coalescing_pool.h"
#include "allocators/detail/pool_policy.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::AddressFitIndex;
using detail::BlockNode;

class NextFitIndex {
 public:
  void insert(uint32_t node, const BlockNode& b) { tree_.insert(node, b.addr, b.size); }
  void erase(uint32_t node, const BlockNode&) { tree_.erase(node); }
  void replace(uint32_t old_node, uint32_t new_node, const BlockNode& b) {
    tree_.replace(old_node, new_node, b.addr, b.size);
  }
  uint32_t find(uint64_t size) const {
    uint32_t node = tree_.first_fit(size, rover_);
    if (node == kNoNode && rover_ != 0) node = tree_.first_fit(size, 0);  // wrap around
    return node;
  }
  // The next search starts just past the block handed out: the remainder of a split.
  void allocated(Addr addr, uint64_t size) { rover_ = addr + size; }
  Addr rover() const { return rover_; }

 private:
  AddressFitIndex tree_;
  Addr rover_ = 0;
};

}  // namespace

PolicyInfo policy_info_nextfit() {
  return {.name = "nextfit",
          .summary = "first fit from a roving pointer that wraps around (next fit)",
          .origin = "Knuth TAOCP 2.5 (roving pointer, exercise 6); Wilson et al. 1995 3.4",
          .options = detail::PoolConfig::option_specs(),
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            return std::make_unique<detail::PoolPolicy<NextFitIndex>>(
                ctx.device, detail::PoolConfig::from_options(ctx.options, "nextfit"));
          }};
}

}  // namespace fraglab
