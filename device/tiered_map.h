// TieredMap: an ordered map kept as a vector of short sorted vectors ("leaves").
//
// The device stack's address maps (physical intervals, segments, an address space's allocations) are
// changed on every device call, and a passthrough replay makes a device call per event: a std::map
// costs a heap allocation and a rebalance per insert and a pointer chase per step. Here a lookup is
// two binary searches over contiguous memory (the leaves' first keys, then one leaf), an insert or
// erase moves at most a leaf's worth of entries, and walking in key order reads arrays. Leaves split
// at 2 * kLeaf entries and merge with a neighbour when they fall below kLeaf / 4, so a map of n
// entries keeps about n / kLeaf leaves whatever the order of inserts and erases.
//
// It offers the part of std::map's interface the device stack uses: begin/end, bidirectional
// iterators over std::pair<K, V> (`it->first`, `it->second`, structured bindings), find,
// lower_bound, upper_bound, emplace, erase. Unlike std::map, an insert or erase invalidates every
// iterator (and the key is not const: changing it through an iterator is the caller's bug).
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace fraglab {

template <class K, class V, size_t kLeaf = 16>
class TieredMap {
 public:
  using key_type = K;
  using mapped_type = V;
  using value_type = std::pair<K, V>;

  template <bool Const>
  class Iter {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = std::pair<K, V>;
    using difference_type = std::ptrdiff_t;
    using reference = std::conditional_t<Const, const value_type&, value_type&>;
    using pointer = std::conditional_t<Const, const value_type*, value_type*>;
    using Map = std::conditional_t<Const, const TieredMap, TieredMap>;

    Iter() = default;
    Iter(Map* map, size_t leaf, size_t pos) : map_(map), leaf_(leaf), pos_(pos) {}
    operator Iter<true>() const  // NOLINT(google-explicit-constructor): as std::map's iterators convert
        requires(!Const) {
      return {map_, leaf_, pos_};
    }

    reference operator*() const { return map_->leaves_[leaf_][pos_]; }
    pointer operator->() const { return &**this; }
    Iter& operator++() {
      if (++pos_ == map_->leaves_[leaf_].size()) ++leaf_, pos_ = 0;
      return *this;
    }
    Iter operator++(int) {
      Iter old = *this;
      ++*this;
      return old;
    }
    Iter& operator--() {
      if (pos_ == 0)
        pos_ = map_->leaves_[--leaf_].size() - 1;
      else
        --pos_;
      return *this;
    }
    Iter operator--(int) {
      Iter old = *this;
      --*this;
      return old;
    }
    bool operator==(const Iter& o) const { return leaf_ == o.leaf_ && pos_ == o.pos_; }

   private:
    friend class TieredMap;
    Map* map_ = nullptr;
    size_t leaf_ = 0, pos_ = 0;
  };
  using iterator = Iter<false>;
  using const_iterator = Iter<true>;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() {
    leaves_.clear();
    firsts_.clear();
    size_ = 0;
  }

  iterator begin() { return {this, 0, 0}; }
  iterator end() { return {this, leaves_.size(), 0}; }
  const_iterator begin() const { return {this, 0, 0}; }
  const_iterator end() const { return {this, leaves_.size(), 0}; }

  // Replaces `out` with the entries in key order, a leaf at a time: the replay engine copies the
  // physical map at every new reserved peak, and copying entry by entry through iterators cost
  // several times more.
  void copy_to(std::vector<value_type>& out) const {
    out.clear();
    out.reserve(size_);
    for (const auto& leaf : leaves_) out.insert(out.end(), leaf.begin(), leaf.end());
  }

  // The first entry whose key is not less than `key` (lower_bound) or greater than it (upper_bound).
  iterator lower_bound(const K& key) { return bound<false>(this, key); }
  const_iterator lower_bound(const K& key) const { return bound<false>(this, key); }
  iterator upper_bound(const K& key) { return bound<true>(this, key); }
  const_iterator upper_bound(const K& key) const { return bound<true>(this, key); }
  iterator find(const K& key) {
    iterator it = lower_bound(key);
    return it != end() && !(key < it->first) ? it : end();
  }
  const_iterator find(const K& key) const {
    const_iterator it = lower_bound(key);
    return it != end() && !(key < it->first) ? it : end();
  }
  size_t count(const K& key) const { return find(key) != end() ? 1 : 0; }

  // Inserts (key, value) unless the key is present; true when inserted. (No iterator is returned:
  // a split would move it.)
  bool emplace(const K& key, V value) {
    if (leaves_.empty()) {
      leaves_.emplace_back().emplace_back(key, std::move(value));
      firsts_.push_back(key);
      size_ = 1;
      return true;
    }
    size_t leaf = leaf_for(key);
    std::vector<value_type>& l = leaves_[leaf];
    auto at = l.begin() + static_cast<std::ptrdiff_t>(upper_index<false>(
                              l.data(), l.size(), key, [](const value_type& e) -> const K& { return e.first; }));
    if (at != l.end() && !(key < at->first)) return false;
    l.emplace(at, key, std::move(value));
    firsts_[leaf] = l.front().first;
    ++size_;
    if (l.size() >= 2 * kLeaf) split(leaf);
    return true;
  }

  // emplace() where `hint` is lower_bound(key) and the key is absent: no search.
  void emplace_hint(const_iterator hint, const K& key, V value) {
    if (leaves_.empty()) {
      emplace(key, std::move(value));
      return;
    }
    size_t leaf = hint.leaf_, pos = hint.pos_;
    if (leaf == leaves_.size()) leaf = leaves_.size() - 1, pos = leaves_[leaf].size();  // after the last
    std::vector<value_type>& l = leaves_[leaf];
    l.emplace(l.begin() + static_cast<std::ptrdiff_t>(pos), key, std::move(value));
    firsts_[leaf] = l.front().first;
    ++size_;
    if (l.size() >= 2 * kLeaf) split(leaf);
  }

  // Erases the entry at `it`; returns the iterator to the entry after it.
  iterator erase(const_iterator it) {
    const size_t leaf = it.leaf_;
    std::vector<value_type>& l = leaves_[leaf];
    l.erase(l.begin() + static_cast<std::ptrdiff_t>(it.pos_));
    --size_;
    if (l.empty()) {
      leaves_.erase(leaves_.begin() + static_cast<std::ptrdiff_t>(leaf));
      firsts_.erase(firsts_.begin() + static_cast<std::ptrdiff_t>(leaf));
      return {this, leaf, 0};
    }
    firsts_[leaf] = l.front().first;
    if (it.pos_ < l.size()) {
      if (l.size() < kLeaf / 4) return merge(leaf, it.pos_);
      return {this, leaf, it.pos_};
    }
    if (l.size() < kLeaf / 4) return merge(leaf, l.size());
    return {this, leaf + 1, 0};
  }
  size_t erase(const K& key) {
    iterator it = find(key);
    if (it == end()) return 0;
    erase(it);
    return 1;
  }

 private:
  // The leaf that holds `key` or where it would go: the last whose first key is not greater.
  size_t leaf_for(const K& key) const {
    size_t n = upper_index(firsts_.data(), firsts_.size(), key, [](const K& k) -> const K& { return k; });
    return n == 0 ? 0 : n - 1;
  }

  // The number of entries of the sorted `a[0, n)` whose key is not greater than `key` (Upper) or
  // less than it: std::upper_bound / lower_bound without branches on the comparisons, which are
  // as good as random on addresses and cost a misprediction each.
  template <bool Upper = true, class E, class KeyOf>
  static size_t upper_index(const E* a, size_t n, const K& key, KeyOf key_of) {
    const E* base = a;
    while (n > 1) {
      size_t half = n / 2;
      bool right = Upper ? !(key < key_of(base[half - 1])) : key_of(base[half - 1]) < key;
      base = right ? base + half : base;
      n -= half;
    }
    bool last = n == 1 && (Upper ? !(key < key_of(*base)) : key_of(*base) < key);
    return static_cast<size_t>(base - a) + (last ? 1 : 0);
  }

  template <bool Upper, class Self>
  static auto bound(Self* self, const K& key) -> Iter<std::is_const_v<Self>> {
    if (self->leaves_.empty()) return {self, 0, 0};
    size_t leaf = self->leaf_for(key);
    const auto& l = self->leaves_[leaf];
    size_t pos = upper_index<Upper>(l.data(), l.size(), key, [](const value_type& e) -> const K& { return e.first; });
    if (pos == l.size()) return {self, leaf + 1, 0};
    return {self, leaf, pos};
  }

  void split(size_t leaf) {
    std::vector<value_type>& l = leaves_[leaf];
    std::vector<value_type> upper(l.begin() + kLeaf, l.end());
    l.resize(kLeaf);
    const K first = upper.front().first;
    leaves_.insert(leaves_.begin() + static_cast<std::ptrdiff_t>(leaf + 1), std::move(upper));
    firsts_.insert(firsts_.begin() + static_cast<std::ptrdiff_t>(leaf + 1), first);
  }

  // Merges a short leaf into a neighbour (when the two stay below a split); returns the iterator
  // to what was its entry `pos` (pos == its size: the entry after it).
  iterator merge(size_t leaf, size_t pos) {
    const size_t n = leaves_[leaf].size();
    if (leaf + 1 < leaves_.size() && n + leaves_[leaf + 1].size() < 2 * kLeaf) {
      auto& next = leaves_[leaf + 1];
      leaves_[leaf].insert(leaves_[leaf].end(), next.begin(), next.end());
      leaves_.erase(leaves_.begin() + static_cast<std::ptrdiff_t>(leaf + 1));
      firsts_.erase(firsts_.begin() + static_cast<std::ptrdiff_t>(leaf + 1));
      return {this, leaf, pos};  // pos == n is now the next leaf's first entry, at the same place
    }
    if (leaf > 0 && n + leaves_[leaf - 1].size() < 2 * kLeaf) {
      auto& prev = leaves_[leaf - 1];
      const size_t offset = prev.size();
      prev.insert(prev.end(), leaves_[leaf].begin(), leaves_[leaf].end());
      leaves_.erase(leaves_.begin() + static_cast<std::ptrdiff_t>(leaf));
      firsts_.erase(firsts_.begin() + static_cast<std::ptrdiff_t>(leaf));
      if (pos == n) return {this, leaf, 0};  // the entry after: the old next leaf, now at `leaf`
      return {this, leaf - 1, offset + pos};
    }
    if (pos == n) return {this, leaf + 1, 0};
    return {this, leaf, pos};
  }

  std::vector<std::vector<value_type>> leaves_;  // each sorted and non-empty; together in key order
  std::vector<K> firsts_;                        // leaves_[i].front().first, for the leaf search
  size_t size_ = 0;
};

}  // namespace fraglab
