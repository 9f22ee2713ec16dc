// TreapIndex: free blocks in address order, answering "the first block at or after
// address A whose size is at least N" in O(log n).
//
// The address-ordered "Cartesian tree" of Stephenson (1983) that Wilson et al. (1995,
// 3.5) describe as the fast way to do first fit and next fit: a search tree on the
// address, augmented with the largest size in each subtree, so whole subtrees too small
// for a request are skipped. We write our own instead of using std::set because std::set
// can neither carry the subtree maximum nor avoid a heap allocation per insert; here the
// items live in a vector indexed by the caller's node ids (BlockList handles), so inserts
// and erases allocate nothing and stay cache-friendly.
//
// Priorities come from a counter through splitmix64, so the shape (and so every result)
// is a pure function of the operation sequence: replays are deterministic.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <vector>

#include "traces/free_slots.h"
#include "traces/trace.h"

namespace fraglab::detail {

class TreapIndex {
 public:
  bool empty() const { return root_ == kNoNode; }
  size_t size() const { return count_; }
  Addr addr(uint32_t node) const { return items_[node].key; }
  uint64_t block_size(uint32_t node) const { return items_[node].size; }

  void insert(uint32_t node, Addr key, uint64_t size) {
    if (node >= items_.size()) items_.resize(node + 1);
    items_[node] = Item{key, size, size, kNoNode, kNoNode, next_priority()};
    root_ = insert_at(root_, node);
    ++count_;
  }

  void erase(uint32_t node) {
    root_ = erase_at(root_, items_[node].key);
    --count_;
  }

  // `new_node` takes `old_node`'s place (they may be the same node) with a new key and
  // size. The new key must sort where the old one did: an address-ordered index uses this
  // when a free block is split (the remainder keeps its place) or grows by merging, with
  // one descent instead of an erase and an insert.
  void replace(uint32_t old_node, uint32_t new_node, Addr key, uint64_t size) {
    Addr old_key = items_[old_node].key;
    if (new_node >= items_.size()) items_.resize(new_node + 1);
    Item moved = items_[old_node];
    moved.key = key;
    moved.size = size;
    items_[new_node] = moved;
    pull(new_node);
    root_ = replace_at(root_, old_key, old_node, new_node);
  }

  // The first node whose key is >= `key`, or kNoNode.
  uint32_t lower_bound(Addr key) const {
    uint32_t x = root_, best = kNoNode;
    while (x != kNoNode) {
      if (items_[x].key < key) {
        x = items_[x].right;
      } else {
        best = x;
        x = items_[x].left;
      }
    }
    return best;
  }

  // The node with the largest key, or kNoNode.
  uint32_t last() const {
    uint32_t x = root_;
    if (x == kNoNode) return kNoNode;
    while (items_[x].right != kNoNode) x = items_[x].right;
    return x;
  }

  // The first node in key order with key >= `from` and size >= `size`, or kNoNode. Subtrees
  // whose largest size is too small are skipped whole, so this is O(depth).
  uint32_t first_fit(uint64_t size, Addr from) const { return first_fit_at(root_, size, from); }

 private:
  struct Item {
    Addr key;
    uint64_t size = 0, max_size = 0;  // this block's size; the largest in its subtree
    uint32_t left = kNoNode, right = kNoNode;
    uint32_t priority = 0;
  };

  uint32_t next_priority() {
    uint64_t z = (counter_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<uint32_t>(z ^ (z >> 31));
  }

  uint64_t max_of(uint32_t x) const { return x == kNoNode ? 0 : items_[x].max_size; }
  void pull(uint32_t x) {
    Item& it = items_[x];
    it.max_size = std::max({it.size, max_of(it.left), max_of(it.right)});
  }

  // Splits subtree x into keys < k (l) and keys >= k (r).
  void split(uint32_t x, Addr k, uint32_t& l, uint32_t& r) {
    if (x == kNoNode) {
      l = r = kNoNode;
      return;
    }
    if (items_[x].key < k) {
      split(items_[x].right, k, items_[x].right, r);
      l = x;
    } else {
      split(items_[x].left, k, l, items_[x].left);
      r = x;
    }
    pull(x);
  }

  // Joins two subtrees, every key of a below every key of b.
  uint32_t merge(uint32_t a, uint32_t b) {
    if (a == kNoNode) return b;
    if (b == kNoNode) return a;
    if (items_[a].priority > items_[b].priority) {
      items_[a].right = merge(items_[a].right, b);
      pull(a);
      return a;
    }
    items_[b].left = merge(a, items_[b].left);
    pull(b);
    return b;
  }

  uint32_t insert_at(uint32_t x, uint32_t node) {
    if (x == kNoNode) return node;
    if (items_[node].priority > items_[x].priority) {
      split(x, items_[node].key, items_[node].left, items_[node].right);
      pull(node);
      return node;
    }
    if (items_[node].key < items_[x].key)
      items_[x].left = insert_at(items_[x].left, node);
    else
      items_[x].right = insert_at(items_[x].right, node);
    pull(x);
    return x;
  }

  uint32_t erase_at(uint32_t x, Addr k) {
    assert(x != kNoNode);
    if (items_[x].key == k) return merge(items_[x].left, items_[x].right);
    if (k < items_[x].key)
      items_[x].left = erase_at(items_[x].left, k);
    else
      items_[x].right = erase_at(items_[x].right, k);
    pull(x);
    return x;
  }

  // Finds old_node by its old key (compared against the other nodes' keys only: when
  // old_node is new_node its key has already changed) and links new_node in its place.
  uint32_t replace_at(uint32_t x, Addr old_key, uint32_t old_node, uint32_t new_node) {
    assert(x != kNoNode);
    if (x == old_node) return new_node;
    if (old_key < items_[x].key)
      items_[x].left = replace_at(items_[x].left, old_key, old_node, new_node);
    else
      items_[x].right = replace_at(items_[x].right, old_key, old_node, new_node);
    pull(x);
    return x;
  }

  uint32_t first_fit_at(uint32_t x, uint64_t size, Addr from) const {
    while (x != kNoNode && items_[x].max_size >= size) {
      const Item& it = items_[x];
      if (it.key < from) {  // x and its left subtree lie before `from`
        x = it.right;
        continue;
      }
      uint32_t left = first_fit_at(it.left, size, from);
      if (left != kNoNode) return left;
      if (it.size >= size) return x;
      x = it.right;  // every key here is >= from: the descent below succeeds if max allows
    }
    return kNoNode;
  }

  std::vector<Item> items_;
  uint32_t root_ = kNoNode;
  size_t count_ = 0;
  uint64_t counter_ = 0;
};

}  // namespace fraglab::detail
