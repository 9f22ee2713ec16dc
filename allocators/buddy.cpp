// buddy: the binary buddy system.
//
// Knowlton, "A Fast Storage Allocator" (CACM 8(10), 1965), as Knuth gives it in TAOCP
// vol. 1, 2.5 (Algorithms R and S); Wilson et al. 1995, 3.6. Memory comes from the device
// in arenas whose size is a power of two; every block is a power of two (at least
// min_block) at an offset from its arena's base that is a multiple of its size, so the
// buddy of the block at offset x of size 2^k is at offset x XOR 2^k. A request of n bytes
// takes a block of order k = ceil(log2 n): the smallest free block of order >= k is
// halved until it has order k, each upper half going onto its order's free list
// (Algorithm R). A freed block merges with its buddy while the buddy is wholly free,
// climbing orders until the buddy is in use or the block is the whole arena (Algorithm S).
// Internal fragmentation (up to half of each block) is the price of the O(log) split and
// merge with no search; that trade-off is what this policy is here to show.
//
// Free lists are LIFO per order like Knuth's AVAIL[k]; a bitmap of non-empty orders finds
// the smallest usable order with one count-trailing-zeros. A request larger than an arena
// gets its own arena of the next power of two. empty_cache returns arenas that merged back
// into one free block.
#include <array>
#include <bit>
#include <unordered_map>

#include "allocators/registry.h"
#include "traces/free_slots.h"

namespace fraglab {
namespace {

uint32_t ceil_log2(uint64_t n) { return n <= 1 ? 0 : 64 - static_cast<uint32_t>(std::countl_zero(n - 1)); }

class Buddy final : public Policy {
 public:
  Buddy(Device& device, uint32_t min_order, uint32_t arena_order)
      : device_(device), min_order_(min_order), arena_order_(arena_order) {
    heads_.fill(kNoNode);
  }

  std::optional<Block> allocate(const AllocRequest& req) override {
    uint32_t order = std::max(ceil_log2(std::max<uint64_t>(req.size, 1)), min_order_);
    if (order > 62) return std::nullopt;  // no device has 2^63 bytes
    uint32_t node = take_from_lists(order);
    if (node == kNoNode) node = new_arena(order, req.stream);
    if (node == kNoNode) {
      empty_cache();
      node = new_arena(order, req.stream);
      if (node == kNoNode) return std::nullopt;
    }
    while (nodes_[node].order > order) split(node);
    return Block{nodes_[node].addr, 1ull << order, node};
  }

  void deallocate(const Block& block) override {
    auto node = static_cast<uint32_t>(block.handle);
    for (;;) {
      const BuddyNode& n = nodes_[node];
      const Arena& arena = arenas_[n.arena];
      if (n.order == arena.order) break;  // the whole arena is free again
      Addr buddy_addr = arena.base + ((n.addr - arena.base) ^ (1ull << n.order));
      auto it = free_at_.find(buddy_addr);
      if (it == free_at_.end() || nodes_[it->second].order != n.order) break;  // buddy (partly) in use
      uint32_t buddy = it->second;
      unlink(buddy);
      uint32_t low = nodes_[buddy].addr < n.addr ? buddy : node;
      uint32_t high = low == node ? buddy : node;
      nodes_[low].order += 1;
      destroy(high);
      node = low;
    }
    link(node);
  }

  void empty_cache() override {
    for (uint32_t a = 0; a < arenas_.size(); ++a) {
      Arena& arena = arenas_[a];
      if (!arena.live) continue;
      auto it = free_at_.find(arena.base);
      if (it == free_at_.end() || nodes_[it->second].order != arena.order) continue;
      const uint32_t node = it->second;  // unlink() erases the map entry `it` points at
      unlink(node);
      destroy(node);
      device_.free_segment(arena.base, 1ull << arena.order);
      arena.live = false;
      dead_arenas_.give_back(a);
    }
  }

 private:
  struct BuddyNode {
    Addr addr = 0;
    uint32_t arena = 0;
    uint32_t order = 0;
    uint32_t prev = kNoNode, next = kNoNode;  // free list links (when free)
  };
  struct Arena {
    Addr base = 0;
    uint32_t order = 0;
    bool live = false;
  };

  uint32_t create(Addr addr, uint32_t arena, uint32_t order) {
    uint32_t i = unused_.take(nodes_);
    nodes_[i] = BuddyNode{addr, arena, order, kNoNode, kNoNode};
    return i;
  }
  void destroy(uint32_t i) { unused_.give_back(i); }

  // Free lists: push and pop at the head, as Knuth's AVAIL lists.
  void link(uint32_t i) {
    BuddyNode& n = nodes_[i];
    n.prev = kNoNode;
    n.next = heads_[n.order];
    if (n.next != kNoNode) nodes_[n.next].prev = i;
    heads_[n.order] = i;
    nonempty_ |= 1ull << n.order;
    free_at_.emplace(n.addr, i);
  }
  void unlink(uint32_t i) {
    BuddyNode& n = nodes_[i];
    if (n.prev != kNoNode)
      nodes_[n.prev].next = n.next;
    else
      heads_[n.order] = n.next;
    if (n.next != kNoNode) nodes_[n.next].prev = n.prev;
    if (heads_[n.order] == kNoNode) nonempty_ &= ~(1ull << n.order);
    free_at_.erase(n.addr);
  }

  // The head of the first non-empty list of order >= `order`, unlinked; kNoNode if none.
  uint32_t take_from_lists(uint32_t order) {
    uint64_t usable = nonempty_ & (~0ull << order);
    if (!usable) return kNoNode;
    uint32_t node = heads_[std::countr_zero(usable)];
    unlink(node);
    return node;
  }

  // Halves a block: it keeps the lower half, the upper half (its buddy) becomes free.
  void split(uint32_t node) {
    uint32_t order = --nodes_[node].order;
    link(create(nodes_[node].addr + (1ull << order), nodes_[node].arena, order));
  }

  uint32_t new_arena(uint32_t order, StreamIndex stream) {
    uint32_t arena_order = std::max(order, arena_order_);
    auto base = device_.allocate_segment(1ull << arena_order, stream);
    if (!base) return kNoNode;
    uint32_t a = dead_arenas_.take(arenas_);
    arenas_[a] = Arena{*base, arena_order, true};
    return create(*base, a, arena_order);
  }

  Device& device_;
  uint32_t min_order_, arena_order_;
  std::vector<BuddyNode> nodes_;
  FreeSlots unused_;
  std::vector<Arena> arenas_;
  FreeSlots dead_arenas_;
  std::array<uint32_t, 64> heads_;              // free list head per order
  uint64_t nonempty_ = 0;                       // bit k: heads_[k] is not empty
  std::unordered_map<Addr, uint32_t> free_at_;  // free block address -> node (buddy lookup)
};

}  // namespace

constexpr SizeOption kMinBlock{"min_block", 512,
                               "smallest block (a power of two; requests round up to a power of two at least this)"};
constexpr SizeOption kArena{"arena", 32ull << 20,
                            "arena size requested from the device (a power of two); larger requests get their own"};

PolicyInfo policy_info_buddy() {
  return {
      .name = "buddy",
      .summary = "binary buddy system: power-of-two blocks split from power-of-two arenas, merged with their buddies",
      .origin = "Knowlton 1965 \"A Fast Storage Allocator\"; Knuth TAOCP 2.5 Algorithms R, S; Wilson et al. 1995 3.6",
      .options = {kMinBlock, kArena},
      .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
        uint64_t min_block = ctx.options.get(kMinBlock);
        uint64_t arena = ctx.options.get(kArena);
        if (!std::has_single_bit(min_block) || !std::has_single_bit(arena) || arena < min_block)
          throw PolicyConfigError("buddy: min_block and arena must be powers of two, arena >= min_block");
        return std::make_unique<Buddy>(ctx.device, ceil_log2(min_block), ceil_log2(arena));
      }};
}

}  // namespace fraglab
