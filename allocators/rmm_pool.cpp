// rmm_pool: RAPIDS RMM's pool_memory_resource over cudaMalloc.
//
// A coalescing best-fit pool with per-stream free lists that grows from its upstream by
// max(request, current pool size), or halfway to maximum_size when one is set: see
// allocators/detail/stream_ordered_pool.h for the model and the source files it follows
// (rapidsai/rmm cpp/include/rmm/mr/pool_memory_resource.hpp, detail/coalescing_free_list.hpp,
// detail/stream_ordered_memory_resource.hpp).
// Checked against RMM v25.10.00 (rapidsai/rmm 7aaad1de; the files under
// cpp/include/rmm/mr/device/ there) on an H100 by tools/peers/rmm_reference.cu (docs/peers.md):
// equal peak reserved and cudaMalloc count on every corpus op list, side_stream_prefetch's
// two streams included.
#include "allocators/detail/stream_ordered_pool.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

class RmmPool final : public Policy {
 public:
  RmmPool(Device& device, uint64_t initial, std::optional<uint64_t> maximum) : pool_(device, initial, maximum) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    auto piece = pool_.allocate(req.size, req.stream);
    if (!piece) return std::nullopt;
    return Block{piece->addr, piece->size, (uint64_t{req.stream} << 32) | piece->node};
  }

  void deallocate(const Block& block) override {
    pool_.deallocate(static_cast<uint32_t>(block.handle), static_cast<StreamIndex>(block.handle >> 32));
  }

  void empty_cache() override { pool_.release_free_blocks(); }

 private:
  detail::StreamOrderedPool pool_;
};

}  // namespace

constexpr SizeOption kInitialSize{"initial_size", 0,
                                  "bytes taken from the device at the first allocation (0 = grow from the first "
                                  "request)"};
constexpr SizeOption kMaximumSize{"maximum_size", 0, "the pool never grows past this (0 = no maximum)"};

PolicyInfo policy_info_rmm_pool() {
  return {
      .name = "rmm_pool",
      .summary = "RAPIDS RMM pool_memory_resource: per-stream coalescing best fit, grows by max(request, pool size)",
      .origin =
          "rapidsai/rmm cpp/include/rmm/mr/pool_memory_resource.hpp, detail/coalescing_free_list.hpp, "
          "detail/stream_ordered_memory_resource.hpp",
      .options = {kInitialSize, kMaximumSize},
      .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
        uint64_t initial = ctx.options.get(kInitialSize);
        uint64_t maximum = ctx.options.get(kMaximumSize);
        if (initial % detail::StreamOrderedPool::kAlignment || maximum % detail::StreamOrderedPool::kAlignment)
          throw PolicyConfigError("rmm_pool: initial_size and maximum_size must be multiples of 256 B");
        if (maximum && initial > maximum) throw PolicyConfigError("rmm_pool: initial_size exceeds maximum_size");
        return std::make_unique<RmmPool>(ctx.device, initial,
                                         maximum ? std::optional<uint64_t>(maximum) : std::nullopt);
      },
      .alignment = detail::StreamOrderedPool::kAlignment,
      .preallocation =
          [](const PolicyOptions& o, std::optional<uint64_t>) {
            uint64_t initial = o.get(kInitialSize);
            return initial ? "initial pool of " + format_size(initial) : std::string();
          },
      .checked_against =
          "RMM v25.10.00 (rapidsai/rmm 7aaad1de), H100: peak reserved and cudaMalloc calls equal on "
          "the 13 corpus op lists"};
}

}  // namespace fraglab
