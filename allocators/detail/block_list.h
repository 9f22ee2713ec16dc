// BlockList: the address-ordered blocks of device segments, with split and merge.
//
// Most caching allocators (PyTorch's, BFC, RMM's pool, CuPy's) carve segments into
// blocks that are split on allocation and merged with free neighbours on free; they
// differ in how they index the free blocks. This is the shared half: nodes in a vector
// (their index is the Block::handle the engine hands back), prev/next links within a
// segment, and a free list of node slots. Policies keep their own free-block index.
#pragma once

#include <cassert>
#include <cstdint>
#include <vector>

#include "traces/free_slots.h"
#include "traces/trace.h"

namespace fraglab::detail {

struct BlockNode {
  Addr addr = 0;
  uint64_t size = 0;
  uint32_t prev = kNoNode, next = kNoNode;  // neighbours in the same segment
  uint32_t segment = 0;                     // caller-defined segment tag (index into its table)
  StreamIndex stream = 0;
  bool free = false;
};

class BlockList {
 public:
  uint32_t create(Addr addr, uint64_t size, uint32_t segment, StreamIndex stream) {
    uint32_t i = unused_.take(nodes_);
    nodes_[i] = BlockNode{addr, size, kNoNode, kNoNode, segment, stream, false};
    return i;
  }

  void destroy(uint32_t i) { unused_.give_back(i); }

  BlockNode& operator[](uint32_t i) { return nodes_[i]; }
  const BlockNode& operator[](uint32_t i) const { return nodes_[i]; }

  // Cuts `size` bytes off the front of node i; the rest becomes a new node after it.
  // Returns the new node (the remainder), marked with i's free flag.
  uint32_t split(uint32_t i, uint64_t size) {
    assert(size < nodes_[i].size);
    BlockNode old = nodes_[i];
    uint32_t r = create(old.addr + size, old.size - size, old.segment, old.stream);
    BlockNode& head = nodes_[i];
    BlockNode& rest = nodes_[r];
    rest.free = old.free;
    rest.prev = i;
    rest.next = old.next;
    if (old.next != kNoNode) nodes_[old.next].prev = r;
    head.size = size;
    head.next = r;
    return r;
  }

  // Absorbs node `next` (which must directly follow `i`) into `i`; `next` is destroyed.
  void absorb_next(uint32_t i) {
    uint32_t n = nodes_[i].next;
    assert(n != kNoNode && nodes_[n].addr == nodes_[i].addr + nodes_[i].size);
    nodes_[i].size += nodes_[n].size;
    nodes_[i].next = nodes_[n].next;
    if (nodes_[i].next != kNoNode) nodes_[nodes_[i].next].prev = i;
    destroy(n);
  }

  // Coalescing on free: node i absorbs its next neighbour, then its previous one absorbs it, each where
  // `take(neighbour)` says yes (it checks the neighbour is free, and whatever else the pool requires, and
  // takes it out of the pool's free index). Returns the node that now holds the merged block.
  template <class Take>
  uint32_t merge_with_free_neighbours(uint32_t i, Take&& take) {
    const uint32_t next = nodes_[i].next;
    if (next != kNoNode && take(next)) absorb_next(i);
    const uint32_t prev = nodes_[i].prev;
    if (prev != kNoNode && take(prev)) {
      absorb_next(prev);
      i = prev;
    }
    return i;
  }

  bool is_whole_segment(uint32_t i) const { return nodes_[i].prev == kNoNode && nodes_[i].next == kNoNode; }

 private:
  std::vector<BlockNode> nodes_;
  FreeSlots unused_;
};

// A mask when `to` is a power of two (alignments and granularities almost always are): a 64-bit
// division costs tens of cycles, and the device-bound policies round on every request. (Not
// std::has_single_bit: without -mpopcnt it is a library call.)
inline uint64_t round_up(uint64_t n, uint64_t to) {
  return to != 0 && (to & (to - 1)) == 0 ? (n + to - 1) & ~(to - 1) : (n + to - 1) / to * to;
}

}  // namespace fraglab::detail
