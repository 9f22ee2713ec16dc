// passthrough: every request is its own device segment, released when the block is freed.
//
// Models calling cudaMalloc/cudaFree directly for every tensor, the baseline every caching
// allocator exists to beat: no fragmentation inside reserved memory (reserved equals the
// live block bytes), at the price of a device call per allocation and per free.
#include "allocators/detail/block_list.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

class Passthrough final : public Policy {
 public:
  Passthrough(Device& device, uint64_t align) : device_(device), align_(align) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    uint64_t size = detail::round_up(std::max<uint64_t>(req.size, 1), align_);
    auto addr = device_.allocate_segment(size, req.stream);
    if (!addr) return std::nullopt;
    return Block{*addr, size, 0};
  }

  void deallocate(const Block& block) override { device_.free_segment(block.addr, block.size); }
  void empty_cache() override {}  // nothing is ever cached

 private:
  Device& device_;
  uint64_t align_;
};

}  // namespace

constexpr SizeOption kAlign{
    "align", 512, "request sizes round up to a multiple of this (cudaMalloc's 512 B granularity)", kMaxOptionAlign};

PolicyInfo policy_info_passthrough() {
  return {.name = "passthrough",
          .summary = "every request is its own cudaMalloc, freed with cudaFree: the no-cache baseline",
          .origin = "CUDA runtime cudaMalloc/cudaFree",
          .options = {kAlign},
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            uint64_t align = ctx.options.get(kAlign);
            if (align == 0) throw PolicyConfigError("passthrough: align must be positive");
            return std::make_unique<Passthrough>(ctx.device, align);
          },
          // The least memory, at a cudaMalloc and a cudaFree per request: a bound, not advice.
          .is_bound = true};
}

}  // namespace fraglab
