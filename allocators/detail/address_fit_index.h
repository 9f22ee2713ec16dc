// AddressFitIndex: free blocks in address order, answering "the first block at or after
// address A whose size is at least N", the search of first fit and next fit.
//
// Stephenson's address-ordered "Cartesian tree" (1983; Wilson et al. 1995, 3.5) answers it
// by keeping the largest size per subtree, and that is what these policies used first (a
// treap). But a first-fit pool holds a few hundred free blocks (335 at most on
// bert_varlen_train, 426 on a generated 10M-event trace), and a root-to-leaf walk of
// scattered nodes per insert, erase, split and merge cost more than the search saves. Here
// the blocks sit in sorted leaves of up to 64 (key, size, node), a B+-tree of two levels:
// the leaves in key order with each one's lowest key and largest size in two flat arrays.
// A search finds its leaf by binary search, scans that leaf, then skips every leaf whose
// largest size is too small with one compare each: the same answer as the tree's (it is
// unique: the first in address order), in a few cache lines.
//
// The cost of a search grows with the leaf count (n / 32 to n / 64) where the tree's grew
// with log n; fine for the hundreds these pools hold, to revisit if one ever holds
// hundreds of thousands of free blocks.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <vector>

#include "traces/free_slots.h"  // kNoNode
#include "traces/trace.h"

namespace fraglab::detail {

class AddressFitIndex {
 public:
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }

  void insert(uint32_t node, Addr key, uint64_t size) {
    remember(node, key);
    ++count_;
    if (order_.empty()) {
      order_.push_back(new_leaf());
      first_.push_back(key);
      max_.push_back(0);
    }
    uint32_t pos = leaf_for(key);
    uint32_t at = position(leaf(pos), key);
    if (leaf(pos).count == kLeaf) {
      split_leaf(pos);
      if (at > kLeaf / 2) at -= kLeaf / 2, ++pos;
    }
    Leaf& l = leaf(pos);
    shift(l, at, at + 1, l.count - at);
    l.keys[at] = key;
    l.sizes[at] = size;
    l.nodes[at] = node;
    ++l.count;
    first_[pos] = l.keys[0];
    max_[pos] = std::max(max_[pos], size);
  }

  void erase(uint32_t node) {
    const Addr key = key_of_[node];
    const uint32_t pos = leaf_for(key);
    Leaf& l = leaf(pos);
    const uint32_t at = position(l, key);
    assert(at < l.count && l.nodes[at] == node);
    const uint64_t size = l.sizes[at];
    shift(l, at + 1, at, l.count - at - 1);
    --l.count;
    --count_;
    if (l.count == 0) {
      drop_leaf(pos);
      return;
    }
    first_[pos] = l.keys[0];
    if (size == max_[pos]) max_[pos] = largest(l);
    if (l.count < kLeaf / 4) merge_small(pos);
  }

  // `new_node` takes `old_node`'s place (they may be the same node) with a new key and
  // size. The new key must sort where the old one did: an address-ordered index uses this
  // when a free block is split (the remainder keeps its place) or grows by merging.
  void replace(uint32_t old_node, uint32_t new_node, Addr key, uint64_t size) {
    const Addr old_key = key_of_[old_node];
    const uint32_t pos = leaf_for(old_key);
    Leaf& l = leaf(pos);
    const uint32_t at = position(l, old_key);
    assert(at < l.count && l.nodes[at] == old_node);
    const uint64_t was = l.sizes[at];
    l.keys[at] = key;
    l.sizes[at] = size;
    l.nodes[at] = new_node;
    remember(new_node, key);
    if (at == 0) first_[pos] = key;
    if (size >= max_[pos])
      max_[pos] = size;
    else if (was == max_[pos])
      max_[pos] = largest(l);
  }

  // The first node whose key is >= `key`, or kNoNode.
  uint32_t lower_bound(Addr key) const {
    if (order_.empty()) return kNoNode;
    const uint32_t pos = leaf_for(key);
    const Leaf& l = leaf(pos);
    const uint32_t at = position(l, key);
    if (at < l.count) return l.nodes[at];
    return pos + 1 < order_.size() ? leaf(pos + 1).nodes[0] : kNoNode;
  }

  // The first node in key order with key >= `from` and size >= `size`, or kNoNode.
  uint32_t first_fit(uint64_t size, Addr from) const {
    if (order_.empty()) return kNoNode;
    uint32_t pos = leaf_for(from);
    if (max_[pos] >= size) {
      const Leaf& l = leaf(pos);
      for (uint32_t i = position(l, from); i < l.count; ++i)
        if (l.sizes[i] >= size) return l.nodes[i];
    }
    const auto n = static_cast<uint32_t>(order_.size());
    for (++pos; pos < n; ++pos)
      if (max_[pos] >= size) {
        const Leaf& l = leaf(pos);
        for (uint32_t i = 0;; ++i)
          if (l.sizes[i] >= size) return l.nodes[i];
      }
    return kNoNode;
  }

 private:
  static constexpr uint32_t kLeaf = 64;
  // Keys, sizes and nodes apart: a search scans sizes alone.
  struct Leaf {
    Addr keys[kLeaf];
    uint64_t sizes[kLeaf];
    uint32_t nodes[kLeaf];
    uint32_t count = 0;
  };

  Leaf& leaf(uint32_t pos) { return leaves_[order_[pos]]; }
  const Leaf& leaf(uint32_t pos) const { return leaves_[order_[pos]]; }

  void remember(uint32_t node, Addr key) {
    if (node >= key_of_.size()) key_of_.resize(node + 1);
    key_of_[node] = key;
  }

  // The leaf that holds `key` or would: the last whose lowest key is <= key (else the first).
  uint32_t leaf_for(Addr key) const {
    auto it = std::upper_bound(first_.begin(), first_.end(), key);
    return it == first_.begin() ? 0 : static_cast<uint32_t>(it - first_.begin()) - 1;
  }
  static uint32_t position(const Leaf& l, Addr key) {
    return static_cast<uint32_t>(std::lower_bound(l.keys, l.keys + l.count, key) - l.keys);
  }
  static uint64_t largest(const Leaf& l) { return *std::max_element(l.sizes, l.sizes + l.count); }

  // Moves n entries of a leaf from index `from` to index `to` (ranges may overlap).
  static void shift(Leaf& l, uint32_t from, uint32_t to, uint32_t n) {
    if (n == 0) return;
    std::memmove(l.keys + to, l.keys + from, n * sizeof(Addr));
    std::memmove(l.sizes + to, l.sizes + from, n * sizeof(uint64_t));
    std::memmove(l.nodes + to, l.nodes + from, n * sizeof(uint32_t));
  }
  // Appends n entries of `src` from index `from` to `dst`.
  static void append(Leaf& dst, const Leaf& src, uint32_t from, uint32_t n) {
    std::memcpy(dst.keys + dst.count, src.keys + from, n * sizeof(Addr));
    std::memcpy(dst.sizes + dst.count, src.sizes + from, n * sizeof(uint64_t));
    std::memcpy(dst.nodes + dst.count, src.nodes + from, n * sizeof(uint32_t));
    dst.count += n;
  }

  uint32_t new_leaf() {
    if (!spare_.empty()) {
      uint32_t id = spare_.back();
      spare_.pop_back();
      leaves_[id].count = 0;
      return id;
    }
    leaves_.emplace_back();
    return static_cast<uint32_t>(leaves_.size() - 1);
  }

  // A full leaf gives its upper half to a new leaf placed after it.
  void split_leaf(uint32_t pos) {
    const uint32_t id = new_leaf();  // (may move leaves_: take references after)
    Leaf& l = leaf(pos);
    Leaf& r = leaves_[id];
    append(r, l, kLeaf / 2, l.count - kLeaf / 2);
    l.count = kLeaf / 2;
    order_.insert(order_.begin() + pos + 1, id);
    first_.insert(first_.begin() + pos + 1, r.keys[0]);
    max_.insert(max_.begin() + pos + 1, largest(r));
    max_[pos] = largest(l);
  }

  void drop_leaf(uint32_t pos) {
    spare_.push_back(order_[pos]);
    order_.erase(order_.begin() + pos);
    first_.erase(first_.begin() + pos);
    max_.erase(max_.begin() + pos);
  }

  // A leaf down to a quarter joins a neighbour when both fit in half a leaf, so that
  // leaves stay at least a quarter full on average and a search skips few of them.
  void merge_small(uint32_t pos) {
    if (pos + 1 < order_.size() && leaf(pos).count + leaf(pos + 1).count <= kLeaf / 2) {
      append(leaf(pos), leaf(pos + 1), 0, leaf(pos + 1).count);
      max_[pos] = std::max(max_[pos], max_[pos + 1]);
      drop_leaf(pos + 1);
    } else if (pos > 0 && leaf(pos - 1).count + leaf(pos).count <= kLeaf / 2) {
      append(leaf(pos - 1), leaf(pos), 0, leaf(pos).count);
      max_[pos - 1] = std::max(max_[pos - 1], max_[pos]);
      drop_leaf(pos);
    }
  }

  std::vector<Leaf> leaves_;     // by id
  std::vector<uint32_t> spare_;  // ids of emptied leaves
  std::vector<uint32_t> order_;  // leaf ids in key order
  std::vector<Addr> first_;      // per leaf in order: its lowest key
  std::vector<uint64_t> max_;    // per leaf in order: its largest size
  std::vector<Addr> key_of_;     // per node: its key (how erase and replace find it)
  size_t count_ = 0;
};

}  // namespace fraglab::detail
