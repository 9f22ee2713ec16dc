// bestfit: coalescing best fit over segments that grow on demand.
//
// The textbook policy (Knuth, TAOCP vol. 1, 2.5; Wilson et al., "Dynamic Storage
// Allocation: A Survey and Critical Review", 1995) on GPU segments: free blocks are
// indexed by (size, address); a request takes the smallest free block that fits (lowest
// address among equals), splitting off the rest; freed blocks merge with free neighbours.
// When nothing fits, a new segment is obtained from the device; when the device is full,
// wholly free segments are returned and the request retried once. Streams share one pool
// (frees arrive stream-safe from the engine).
#include <set>
#include <tuple>

#include "allocators/detail/block_list.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::BlockList;
using detail::kNoNode;
using detail::round_up;

struct Segment {
  Addr addr;
  uint64_t size;
};

class BestFit final : public Policy {
 public:
  BestFit(Device& device, uint64_t align, uint64_t min_segment, uint64_t segment_round)
      : device_(device), align_(align), min_segment_(min_segment), segment_round_(segment_round) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    uint64_t size = round_up(std::max<uint64_t>(req.size, 1), align_);
    uint32_t node = find_fit(size);
    if (node == kNoNode) node = grow(size, req.stream);
    if (node == kNoNode) {
      empty_cache();
      node = grow(size, req.stream);
      if (node == kNoNode) return std::nullopt;
    }
    take(node);
    if (blocks_[node].size - size >= align_) {
      uint32_t rest = blocks_.split(node, size);
      put(rest);
    }
    return Block{blocks_[node].addr, blocks_[node].size, node};
  }

  void deallocate(const Block& block) override {
    auto node = static_cast<uint32_t>(block.handle);
    blocks_[node].free = true;
    uint32_t next = blocks_[node].next;
    if (next != kNoNode && blocks_[next].free) {
      take(next);
      blocks_.absorb_next(node);
    }
    uint32_t prev = blocks_[node].prev;
    if (prev != kNoNode && blocks_[prev].free) {
      take(prev);
      blocks_.absorb_next(prev);
      node = prev;
    }
    blocks_[node].free = true;
    put(node);
  }

  void empty_cache() override {
    for (auto it = free_.begin(); it != free_.end();) {
      uint32_t node = std::get<2>(*it);
      if (!blocks_.is_whole_segment(node)) {
        ++it;
        continue;
      }
      it = free_.erase(it);
      device_.free_segment(blocks_[node].addr, blocks_[node].size);
      blocks_.destroy(node);
    }
  }

 private:
  using FreeKey = std::tuple<uint64_t, Addr, uint32_t>;  // (size, address, node)

  uint32_t find_fit(uint64_t size) const {
    auto it = free_.lower_bound(FreeKey{size, 0, 0});
    return it == free_.end() ? kNoNode : std::get<2>(*it);
  }

  uint32_t grow(uint64_t size, StreamIndex stream) {
    uint64_t seg = std::max(round_up(size, segment_round_), min_segment_);
    auto addr = device_.allocate_segment(seg, stream);
    if (!addr) return kNoNode;
    uint32_t node = blocks_.create(*addr, seg, 0, stream);
    blocks_[node].free = true;
    put(node);
    return node;
  }

  void put(uint32_t node) {
    blocks_[node].free = true;
    free_.emplace(blocks_[node].size, blocks_[node].addr, node);
  }
  void take(uint32_t node) {
    free_.erase(FreeKey{blocks_[node].size, blocks_[node].addr, node});
    blocks_[node].free = false;
  }

  Device& device_;
  uint64_t align_, min_segment_, segment_round_;
  BlockList blocks_;
  std::set<FreeKey> free_;
};

}  // namespace

PolicyInfo policy_info_bestfit() {
  return {"bestfit",
          "coalescing best fit over segments that grow on demand",
          "Knuth TAOCP 2.5; Wilson et al. 1995, \"Dynamic Storage Allocation: A Survey\"",
          {{"align", "512", "block sizes round up to a multiple of this"},
           {"min_segment", "2MiB", "smallest segment requested from the device"},
           {"segment_round", "2MiB", "segment sizes round up to a multiple of this"}},
          [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            uint64_t align = ctx.options.get_size("align", 512);
            uint64_t min_segment = ctx.options.get_size("min_segment", 2ull << 20);
            uint64_t segment_round = ctx.options.get_size("segment_round", 2ull << 20);
            if (align == 0 || segment_round == 0 || segment_round % align)
              throw PolicyConfigError("bestfit: align must be positive and divide segment_round");
            return std::make_unique<BestFit>(ctx.device, align, min_segment, segment_round);
          }};
}

}  // namespace fraglab
