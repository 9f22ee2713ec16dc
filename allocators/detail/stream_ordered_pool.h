// StreamOrderedPool: the core of RMM's pool_memory_resource, shared by the rmm_pool and
// rmm_binning policies (binning's bins and fallback draw from one pool, as in RMM).
//
// rapidsai/rmm cpp/include/rmm/mr/pool_memory_resource.hpp, detail/stream_ordered_memory_resource.hpp
// and detail/coalescing_free_list.hpp:
//  - sizes align up to 256 B (CUDA_ALLOCATION_ALIGNMENT);
//  - one address-ordered coalescing free list per stream; a freed block returns to its
//    stream's list and merges with free neighbours there, never across upstream blocks
//    (is_head); allocation takes the list's best fit and puts the remainder back;
//  - a miss on its own stream takes a block from another stream's list (RMM waits on that
//    stream's event; the remainder stays in that stream's list), then merges the other lists
//    into its own one by one (the "sync and merge" path), then grows the pool;
//  - growth (size_to_grow / try_to_expand): max(request, pool size) without a maximum,
//    else max(request, half of what is left to the maximum); a failed upstream allocation is
//    retried at half the size down to the request.
// RMM gives memory back only in release() (the destructor); release_free_blocks() does that
// for wholly free upstream blocks so empty_cache can return them.
// Checked against RMM v25.10.00 (docs/peers.md): equal on every corpus op list. One detail of
// RMM is not followed: it looks through the other streams' lists in the order of their
// cudaEvent_t handles (a std::map keyed on the event), which the driver picks; here in stream
// order. It can matter only with three or more streams (the corpus has at most two).
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "allocators/detail/block_list.h"
#include "allocators/detail/per_stream_keys.h"
#include "device/device.h"

namespace fraglab::detail {

class StreamOrderedPool {
 public:
  static constexpr uint64_t kAlignment = 256;

  struct Piece {
    Addr addr;
    uint64_t size;
    uint32_t node;
  };

  StreamOrderedPool(Device& device, uint64_t initial_size, std::optional<uint64_t> maximum_size)
      : device_(device), initial_size_(initial_size), maximum_size_(maximum_size) {}

  std::optional<Piece> allocate(uint64_t bytes, StreamIndex stream) {
    uint64_t size = round_up(std::max<uint64_t>(bytes, 1), kAlignment);
    if (!initialized_) {
      initialized_ = true;
      if (initial_size_ > 0) {
        uint32_t head = expand(initial_size_, initial_size_, stream);
        if (head != kNoNode) put(head);
      }
    }
    uint32_t node = best_fit(stream, size);
    if (node == kNoNode) node = take_from_other_stream(stream, size);
    if (node == kNoNode) node = merge_other_streams(stream, size);
    if (node == kNoNode) node = expand(size_to_grow(size), size, stream);
    if (node == kNoNode) return std::nullopt;
    blocks_[node].free = false;
    // The remainder goes back to the list the block came from, another stream's when it was
    // taken from there (allocate_and_insert_remainder(block, size, other_blocks)).
    if (blocks_[node].size > size) put(blocks_.split(node, size));
    blocks_[node].stream = stream;
    return Piece{blocks_[node].addr, blocks_[node].size, node};
  }

  void deallocate(uint32_t node, StreamIndex stream) {
    blocks_[node].stream = stream;
    put(node);
  }

  // Returns every upstream block that is wholly free to the device. A synchronisation
  // point: the streams' lists merge first, so blocks split across streams join up.
  void release_free_blocks() {
    if (nonempty_.empty()) return;
    merge_other_streams(lowest_listed_, UINT64_MAX);
    for (StreamIndex stream : std::set<StreamIndex>(nonempty_)) {
      FreeList& list = *lists_.find(stream);
      whole_.clear();
      for (const FreeKey& k : list)
        if (blocks_.is_whole_segment(k.node)) whole_.push_back(k);
      for (const FreeKey& k : whole_) {
        list.erase(k);
        device_.free_segment(blocks_[k.node].addr, blocks_[k.node].size);
        pool_size_ -= blocks_[k.node].size;
        blocks_.destroy(k.node);
      }
      if (list.empty()) became_empty(stream);
    }
  }

  uint64_t pool_size() const { return pool_size_; }

 private:
  // A stream's free list in best-fit order, (size, address): RMM's std::set order, in
  // OrderedKeys (no heap node per block).
  struct FreeKey {
    uint64_t hi;  // size
    uint64_t lo;  // address
    uint32_t node;
  };
  using FreeList = OrderedKeys<FreeKey>;
  static FreeKey key_of(const BlockNode& b, uint32_t node) { return FreeKey{b.size, b.addr, node}; }

  uint32_t best_fit(StreamIndex stream, uint64_t size) {
    FreeList* list = lists_.find(stream);
    if (!list) return kNoNode;
    auto it = list->lower_bound(FreeKey{size, 0, 0});
    if (it == list->end()) return kNoNode;
    uint32_t node = it->node;
    list->erase(it);
    if (list->empty()) became_empty(stream);
    return node;
  }

  void became_empty(StreamIndex stream) {
    nonempty_.erase(stream);
    lists_.release_if_empty(stream);
  }

  // Both walk the streams with free blocks only, in stream order (RMM: in cudaEvent_t handle
  // order); walking every stream's (mostly empty) list made each miss cost the stream count
  // (70K streams: minutes).
  uint32_t take_from_other_stream(StreamIndex stream, uint64_t size) {
    for (StreamIndex other : nonempty_) {
      if (other == stream) continue;
      uint32_t node = best_fit(other, size);
      if (node != kNoNode) return node;
    }
    return kNoNode;
  }

  uint32_t merge_other_streams(StreamIndex stream, uint64_t size) {
    for (auto at = nonempty_.begin(); at != nonempty_.end();) {
      StreamIndex other = *at++;  // advanced first: `other` leaves the set below
      if (other == stream) continue;
      FreeList& list = *lists_.find(other);
      moving_.assign(list.begin(), list.end());  // the list leaves `other` whole, then merges in order
      for (const FreeKey& key : moving_) list.erase(key);
      became_empty(other);
      for (const FreeKey& key : moving_) {
        blocks_[key.node].stream = stream;
        blocks_[key.node].free = false;  // put() re-inserts and merges it into this stream's list
        put(key.node);
      }
      uint32_t node = best_fit(stream, size);
      if (node != kNoNode) return node;
    }
    return kNoNode;
  }

  uint64_t size_to_grow(uint64_t size) const {
    if (!maximum_size_) return std::max(size, pool_size_);
    if (pool_size_ >= *maximum_size_) return 0;
    uint64_t remaining = round_up(*maximum_size_ - pool_size_, kAlignment);
    return size <= remaining ? std::max(size, remaining / 2) : 0;
  }

  // A new upstream block of try_size bytes, halving down to min_size on failure.
  uint32_t expand(uint64_t try_size, uint64_t min_size, StreamIndex stream) {
    while (try_size >= min_size && try_size > 0) {
      auto addr = device_.allocate_segment(try_size, stream);
      if (addr) {
        pool_size_ += try_size;
        return blocks_.create(*addr, try_size, 0, stream);
      }
      if (try_size == min_size) break;
      try_size = std::max(min_size, try_size / 2);
    }
    return kNoNode;
  }

  // Inserts a free block into its stream's list, merging with free neighbours there.
  void put(uint32_t node) {
    StreamIndex stream = blocks_[node].stream;
    lowest_listed_ = std::min(lowest_listed_, stream);
    FreeList& list = lists_.get(stream);
    node = blocks_.merge_with_free_neighbours(node, [&](uint32_t n) {
      if (!blocks_[n].free || blocks_[n].stream != stream) return false;  // blocks merge within a stream
      list.erase(key_of(blocks_[n], n));
      return true;
    });
    blocks_[node].free = true;
    list.insert(key_of(blocks_[node], node));
    if (list.size() == 1) nonempty_.insert(stream);
  }

  Device& device_;
  uint64_t initial_size_;
  std::optional<uint64_t> maximum_size_;
  bool initialized_ = false;
  uint64_t pool_size_ = 0;
  BlockList blocks_;
  PerStreamKeys<FreeKey> lists_;
  std::set<StreamIndex> nonempty_;  // streams whose list holds a block
  // The lowest stream that ever had a free list: where release_free_blocks merges (RMM keeps
  // a list for every stream that ever freed, and merges into the first in its map).
  StreamIndex lowest_listed_ = UINT16_MAX;
  std::vector<FreeKey> moving_, whole_;  // merge_other_streams' and release_free_blocks' blocks
};

}  // namespace fraglab::detail
