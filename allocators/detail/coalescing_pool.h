// CoalescingPool: free ranges over device segments, address-ordered, split on
// allocation and merged with free neighbours on free, with a pluggable fit.
//
// This is the machinery every "sequential fit" allocator shares (Knuth TAOCP vol. 1,
// 2.5; Wilson et al. 1995, 3.2-3.5) and that RMM's pool keeps in
// detail/coalescing_free_list.hpp: segments are obtained from the device on demand
// (cudaMalloc-like), carved into blocks (BlockList), and a free block is found by the
// policy's FitIndex (the concept below). The policies differ only in that index; its
// optional members are used when present:
//
//   uint32_t take(uint64_t size);                     // find() and erase() in one search
//   void allocated(Addr addr, uint64_t size);         // a block was handed out
//   // The least block size find(size) can return, when it rounds requests up (TLSF's good
//   // fit); new segments are made at least this large so that they are found again by the
//   // same request once free.
//   uint64_t searched_size(uint64_t size) const;
//   // For indexes in address order: new_node (now b) takes old_node's place.
//   void replace(uint32_t old_node, uint32_t new_node, const BlockNode& b);
//
// A request that finds nothing grows the pool by one segment; when the device is full,
// wholly free segments are returned and the growth retried once (what bestfit always did
// and what PyTorch does before reporting OOM).
#pragma once

#include <algorithm>
#include <concepts>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "allocators/detail/block_list.h"
#include "allocators/policy.h"

namespace fraglab::detail {

// The options every pool-based policy takes.
constexpr SizeOption kPoolAlign{"align", 512, "block sizes round up to a multiple of this", kMaxOptionAlign};
constexpr SizeOption kPoolMinSegment{"min_segment", 2ull << 20, "smallest segment requested from the device"};
constexpr SizeOption kPoolSegmentRound{"segment_round", 2ull << 20, "segment sizes round up to a multiple of this",
                                       kMaxOptionAlign};
constexpr SizeOption kPoolMinSplit{"min_split", 512,
                                   "a free remainder smaller than this stays with the block (internal slack)"};

struct PoolConfig {
  uint64_t align = kPoolAlign.default_value;
  uint64_t min_segment = kPoolMinSegment.default_value;
  uint64_t segment_round = kPoolSegmentRound.default_value;
  uint64_t min_split = kPoolMinSplit.default_value;

  // The options every pool-based policy takes, then a policy's own `more`.
  static std::vector<OptionSpec> option_specs(std::vector<OptionSpec> more = {});
  // Reads them; throws PolicyConfigError naming `policy` on inconsistent values.
  static PoolConfig from_options(const PolicyOptions& options, const std::string& policy);

  uint64_t block_size(uint64_t request) const { return round_up(std::max<uint64_t>(request, 1), align); }
  uint64_t segment_size(uint64_t block) const { return std::max(round_up(block, segment_round), min_segment); }
};

// An index of the free blocks: told when a block becomes free and when it stops being free,
// and asked for a free block of at least a size (kNoNode when none).
template <class Index>
concept FitIndex = std::movable<Index> && requires(Index& index, uint32_t node, const BlockNode& b, uint64_t size) {
  index.insert(node, b);  // b became free
  index.erase(node, b);   // b is no longer a free block
  { index.find(size) } -> std::same_as<uint32_t>;
};

template <FitIndex Index>
class CoalescingPool {
 public:
  CoalescingPool(Device& device, PoolConfig config, Index index = {})
      : device_(device), config_(config), index_(std::move(index)) {}

  // A block of block_size(request) bytes (a little more when the remainder would be
  // below min_split), or nullopt when the device cannot supply a segment.
  std::optional<Block> allocate(uint64_t request, StreamIndex stream) {
    uint64_t size = config_.block_size(request);
    uint32_t node = kNoNode;
    if constexpr (requires { index_.take(size); }) {
      node = index_.take(size);  // one search instead of find() then erase()
      if (node != kNoNode) blocks_[node].free = false;
    } else {
      node = index_.find(size);
      if (node != kNoNode) {
        if constexpr (kAddressOrdered) {
          if (blocks_[node].size - size >= config_.min_split) return split_in_place(node, size);
        }
        take(node);
      }
    }
    if (node == kNoNode) {
      node = grow(size, stream);
      if (node == kNoNode) {
        release_free_segments();
        node = grow(size, stream);
        if (node == kNoNode) return std::nullopt;
      }
    }
    if (blocks_[node].size - size >= config_.min_split) put(blocks_.split(node, size));
    return handed_out(node);
  }

  void deallocate(uint32_t node) {
    if constexpr (kAddressOrdered) {
      deallocate_in_place(node);
      return;
    }
    put(blocks_.merge_with_free_neighbours(node, [this](uint32_t n) {
      if (!blocks_[n].free) return false;
      take(n);
      return true;
    }));
  }

  // Returns every wholly free segment to the device, in address order.
  void release_free_segments() {
    for (auto it = segments_.begin(); it != segments_.end();) {
      uint32_t head = it->second;
      if (!blocks_[head].free || !blocks_.is_whole_segment(head)) {
        ++it;
        continue;
      }
      take(head);
      device_.free_segment(blocks_[head].addr, blocks_[head].size);
      blocks_.destroy(head);
      it = segments_.erase(it);
    }
  }

  const PoolConfig& config() const { return config_; }
  const BlockList& blocks() const { return blocks_; }
  Index& index() { return index_; }
  size_t segment_count() const { return segments_.size(); }

 private:
  static constexpr bool kAddressOrdered = requires(Index & index, const BlockNode& b) {
    index.replace(uint32_t{}, uint32_t{}, b);
  };

  // Splits free block `node` whose remainder keeps its place in an address-ordered index.
  Block split_in_place(uint32_t node, uint64_t size) {
    uint32_t rest = blocks_.split(node, size);  // the remainder inherits the free flag
    index_.replace(node, rest, blocks_[rest]);
    blocks_[node].free = false;
    return handed_out(node);
  }

  Block handed_out(uint32_t node) {
    const BlockNode& b = blocks_[node];
    if constexpr (requires { index_.allocated(b.addr, b.size); }) index_.allocated(b.addr, b.size);
    return Block{b.addr, b.size, node};
  }

  // Merging in an address-ordered index: a free block that grows keeps its place, and a
  // block absorbed by its free predecessor or taking over its free successor's place
  // needs no insert.
  void deallocate_in_place(uint32_t node) {
    uint32_t next = blocks_[node].next, prev = blocks_[node].prev;
    bool next_free = next != kNoNode && blocks_[next].free;
    bool prev_free = prev != kNoNode && blocks_[prev].free;
    if (prev_free) {
      if (next_free) {
        take(next);
        blocks_.absorb_next(node);
      }
      blocks_.absorb_next(prev);
      index_.replace(prev, prev, blocks_[prev]);
    } else if (next_free) {
      blocks_.absorb_next(node);  // `next` is gone from the block list, still in the index
      blocks_[node].free = true;
      index_.replace(next, node, blocks_[node]);
    } else {
      put(node);
    }
  }

  // A new segment for a block of `size` bytes; its one node is free but not indexed.
  uint32_t grow(uint64_t size, StreamIndex stream) {
    if constexpr (requires { index_.searched_size(size); }) size = std::max(size, index_.searched_size(size));
    uint64_t seg = config_.segment_size(size);
    auto addr = device_.allocate_segment(seg, stream);
    if (!addr) return kNoNode;
    uint32_t node = blocks_.create(*addr, seg, 0, stream);
    segments_.emplace(*addr, node);  // a segment's head node stays its head: merges keep the lower node
    return node;
  }

  void put(uint32_t node) {
    blocks_[node].free = true;
    index_.insert(node, blocks_[node]);
  }
  void take(uint32_t node) {
    index_.erase(node, blocks_[node]);
    blocks_[node].free = false;
  }

  Device& device_;
  PoolConfig config_;
  Index index_;
  BlockList blocks_;
  std::map<Addr, uint32_t> segments_;  // segment address -> its head node
};

}  // namespace fraglab::detail
