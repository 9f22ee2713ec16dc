// OrderedKeys: an ordered set of 16-byte keys (hi, lo), the free-block pools of the PyTorch
// model (allocators/pytorch/caching_allocator.h).
//
// PyTorch keeps each pool in a std::set ordered by (stream, size, address), and the model
// must visit blocks in exactly that order. The keys pack that order into (hi, lo): hi's top
// 16 bits are a group (the stream's rank), its low 48 bits a value (the size); lo breaks
// ties (the address). A sorted vector (what the model used first) costs a binary search
// over the whole pool and a memmove of half of it per insert or erase; a node-based tree
// costs a heap allocation and a pointer chase per level. Here, as in SizeBins (TLSF,
// Masmano et al. 2004), each group's keys are binned by value: 512-unit steps below 32 Ki,
// then 64 linear bins per power of two, with a two-level bitmap of non-empty bins; each bin
// is a small array sorted by (hi, lo). Every key in a higher bin (or group) is larger than
// every key in a lower one, so the concatenation of the bins is the set's order: a
// lower_bound is a search inside one bin or else the front of the next non-empty bin (two
// count-trailing-zeros), and an insert or erase moves one bin's keys, a handful where
// sizes vary and the same run of equal sizes the vector moved where they do not.
// A bin stores its keys largest first (as SizeBins' best fit does): what a search hands
// out is most often a bin's smallest key (the front of the next non-empty bin, or the
// lowest address of an exact size), which then leaves from the array's back without
// moving the others (PyTorch model on bert_varlen_train 10% faster; gmlake, whose free
// pBlocks pile up by the hundred in one bin, 1.7x on a random trace).
//
// Iterators are positions (group, bin, index) in the set's order; like a vector's, they are
// invalidated by any insert or erase.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <type_traits>
#include <vector>

#include "allocators/detail/key_bin.h"

namespace fraglab::detail {

// Key: any struct with uint64_t hi and lo (and more, if the caller likes); the order is (hi, lo).
template <class Key>
class OrderedKeys {
  static_assert(std::is_trivially_copyable_v<Key>, "bins move keys as bytes");

 public:
  static constexpr int kValueBits = 48;  // hi = group << 48 | value
  static bool less(const Key& a, const Key& b) { return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo; }
  static bool same(const Key& a, const Key& b) { return a.hi == b.hi && a.lo == b.lo; }

  class iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = Key;
    using difference_type = std::ptrdiff_t;
    using pointer = const Key*;
    using reference = const Key&;
    iterator() = default;
    const Key& operator*() const {
      const Bin& b = set_->groups_[group()]->bins[bin()];
      return b.keys[b.size - 1 - pos()];  // stored largest first
    }
    const Key* operator->() const { return &**this; }
    iterator& operator++() {
      set_->step_forward(*this);
      return *this;
    }
    iterator& operator--() {
      set_->step_back(*this);
      return *this;
    }
    iterator operator++(int) {
      iterator was = *this;
      ++*this;
      return was;
    }
    friend bool operator==(const iterator& a, const iterator& b) { return a.where_ == b.where_; }

   private:
    friend class OrderedKeys;
    // (group, bin, pos) packed in one word: an iterator is built in registers and compared in one
    // instruction (three 32-bit fields were stored apart and reloaded as one 64-bit word for the
    // comparison with end(), a store-forwarding stall in the model's hottest loop).
    iterator(const OrderedKeys* set, uint32_t group, uint32_t bin, uint32_t pos)
        : set_(set), where_(uint64_t{group} << 44 | uint64_t{bin} << 32 | pos) {}
    uint32_t group() const { return static_cast<uint32_t>(where_ >> 44); }
    uint32_t bin() const { return static_cast<uint32_t>(where_ >> 32) & 0xfffu; }
    uint32_t pos() const { return static_cast<uint32_t>(where_); }
    const OrderedKeys* set_ = nullptr;
    uint64_t where_ = 0;
  };

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  iterator end() const { return {this, static_cast<uint32_t>(groups_.size()), 0, 0}; }
  iterator begin() const { return first_from(0); }

  // The first key not less than k.
  iterator lower_bound(const Key& k) const {
    const uint32_t g = group_of(k);
    if (g >= groups_.size()) return end();
    const Group& group = *groups_[g];
    const uint32_t b = bin_of(k.hi);
    const Bin& bin = group.bins[b];
    const uint32_t pos = position(bin, k);
    if (pos < bin.size) return {this, g, b, pos};
    const uint32_t next = group.next_nonempty(b + 1);
    if (next != kNoBin) return {this, g, next, 0};
    return first_from(g + 1);
  }

  bool insert(const Key& k) {
    Group& group = group_for(group_of(k));
    const uint32_t b = bin_of(k.hi);
    Bin& bin = group.bins[b];
    const uint32_t n = bin.size;
    const uint32_t pos = position(bin, k);
    if (pos < n && same(bin.keys[n - 1 - pos], k)) return false;
    if (n == bin.cap) bin.grow();
    // Stored largest first: the `pos` keys less than k, at the back, move up one.
    shift_up(bin.keys + (n - pos), pos);
    bin.keys[n - pos] = k;
    bin.size = n + 1;
    if (n == 0) group.set_bit(b);
    ++count_;
    return true;
  }

  size_t erase(const Key& k) {
    const uint32_t g = group_of(k);
    if (g >= groups_.size()) return 0;
    const uint32_t b = bin_of(k.hi);
    const Bin& bin = groups_[g]->bins[b];
    const uint32_t pos = position(bin, k);
    if (pos == bin.size || !same(bin.keys[bin.size - 1 - pos], k)) return 0;
    erase(iterator{this, g, b, pos});
    return 1;
  }

  void erase(iterator at) {
    Group& group = *groups_[at.group()];
    Bin& bin = group.bins[at.bin()];
    const uint32_t n = --bin.size;
    // Stored largest first: the keys less than it (at.pos() of them, behind it) move down one; the
    // smallest, which a search takes most often, leaves from the back without moving any.
    shift_down(bin.keys + (n - at.pos()), at.pos());
    if (n == 0) group.clear_bit(at.bin());
    --count_;
  }

  // erase(at) + insert(now): a split's remainder or a merged block nearly always changes bin (on a
  // random trace 4,373 of 6.3M replacements stayed in theirs).
  void replace(iterator at, const Key& now) {
    erase(at);
    insert(now);
  }
  // The same for the key `old` (which must be in the set).
  void replace(const Key& old, const Key& now) {
    erase(old);
    insert(now);
  }

 private:
  static constexpr uint32_t kNoBin = UINT32_MAX;
  static constexpr uint32_t kLinearShift = 9;  // 512-unit steps below kLinearLimit
  // 64 rather than SizeBins' 32: where sizes vary (random traces) fewer keys share a bin, so
  // fewer are scanned and shifted per insert and erase, for a 35 KB bin table a group.
  static constexpr uint32_t kSubBinsLog2 = 6;
  static constexpr uint32_t kSubBins = 1u << kSubBinsLog2;
  static constexpr uint32_t kLinearLimitLog2 = kLinearShift + kSubBinsLog2;  // 32 Ki
  static constexpr uint64_t kLinearLimit = 1ull << kLinearLimitLog2;
  static constexpr uint32_t kBins = kSubBins + (kValueBits - kLinearLimitLog2) * kSubBins;
  static constexpr uint32_t kWords = (kBins + 63) / 64;
  static_assert(kWords <= 64, "the summary word covers at most 64 bitmap words");
  static_assert(kBins <= 4096, "an iterator holds the bin in 12 bits");
  static constexpr uint64_t kValueMask = (1ull << kValueBits) - 1;

  using Bin = KeyBin<Key>;

  // An insert or erase moves the keys after its place by one. Most bins hold a key or two, where
  // moving by hand beats a memmove call; a long run (gmlake's free pBlocks pile up hundreds of one
  // size in a bin) is one memmove: moved key by key it took a third of gmlake's replay of a random trace.
  static constexpr uint32_t kMoveByHand = 16;
  static void shift_up(Key* from, uint32_t count) {  // [from, from + count) to [from + 1, ...)
    if (count > kMoveByHand) [[unlikely]] {
      std::memmove(static_cast<void*>(from + 1), from, count * sizeof(Key));
      return;
    }
    for (uint32_t i = count; i > 0; --i) from[i] = from[i - 1];
  }
  static void shift_down(Key* to, uint32_t count) {  // [to + 1, to + 1 + count) to [to, ...)
    if (count > kMoveByHand) [[unlikely]] {
      std::memmove(static_cast<void*>(to), to + 1, count * sizeof(Key));
      return;
    }
    for (uint32_t i = 0; i < count; ++i) to[i] = to[i + 1];
  }

  // lower_bound inside one bin, as a place in the set's order: how many of its keys are less than k.
  // A bin stores its keys largest first, so those lie at its back: a short bin (the usual case) is
  // scanned from there, a long one halved.
  static uint32_t position(const Bin& bin, const Key& k) {
    const uint32_t n = bin.size;
    if (n > 8) {
      const Key* not_less = std::partition_point(bin.keys, bin.keys + n, [&k](const Key& x) { return !less(x, k); });
      return n - static_cast<uint32_t>(not_less - bin.keys);
    }
    uint32_t i = 0;
    while (i < n && less(bin.keys[n - 1 - i], k)) ++i;
    return i;
  }

  static uint32_t group_of(const Key& k) { return static_cast<uint32_t>(k.hi >> kValueBits); }
  static uint32_t bin_of(uint64_t hi) {
    const uint64_t value = hi & kValueMask;
    if (value < kLinearLimit) return static_cast<uint32_t>(value >> kLinearShift);
    const uint32_t fl = 63 - static_cast<uint32_t>(std::countl_zero(value));
    const uint32_t sl = static_cast<uint32_t>(value >> (fl - kSubBinsLog2)) & (kSubBins - 1);
    return kSubBins + (fl - kLinearLimitLog2) * kSubBins + sl;
  }

  // Held by pointer, so a group never moves and its bins need no copy or move.
  struct Group {
    Bin bins[kBins];
    uint64_t words[kWords] = {};
    uint64_t summary = 0;

    Group() = default;
    Group(const Group&) = delete;
    Group& operator=(const Group&) = delete;
    ~Group() {
      for (Bin& bin : bins) bin.release();
    }

    void set_bit(uint32_t b) {
      words[b / 64] |= 1ull << (b % 64);
      summary |= 1ull << (b / 64);
    }
    void clear_bit(uint32_t b) {
      words[b / 64] &= ~(1ull << (b % 64));
      if (words[b / 64] == 0) summary &= ~(1ull << (b / 64));
    }
    // The first non-empty bin at or after b, or kNoBin.
    uint32_t next_nonempty(uint32_t b) const {
      if (b >= kBins) return kNoBin;
      uint32_t w = b / 64;
      if (uint64_t bits = words[w] & (~0ull << (b % 64))) return w * 64 + static_cast<uint32_t>(std::countr_zero(bits));
      uint64_t higher = w + 1 < 64 ? summary & (~0ull << (w + 1)) : 0;
      if (!higher) return kNoBin;
      w = static_cast<uint32_t>(std::countr_zero(higher));
      return w * 64 + static_cast<uint32_t>(std::countr_zero(words[w]));
    }
    // The last non-empty bin before b (b <= kBins), or kNoBin.
    uint32_t prev_nonempty(uint32_t b) const {
      if (b == 0) return kNoBin;
      --b;
      uint32_t w = b / 64;
      if (uint64_t bits = words[w] & (~0ull >> (63 - b % 64)))
        return w * 64 + 63 - static_cast<uint32_t>(std::countl_zero(bits));
      uint64_t lower = summary & ((1ull << w) - 1);
      if (!lower) return kNoBin;
      w = 63 - static_cast<uint32_t>(std::countl_zero(lower));
      return w * 64 + 63 - static_cast<uint32_t>(std::countl_zero(words[w]));
    }
  };

  Group& group_for(uint32_t g) {
    while (g >= groups_.size()) groups_.push_back(std::make_unique<Group>());
    return *groups_[g];
  }

  // The first key of group g or a later one.
  iterator first_from(uint32_t g) const {
    for (; g < groups_.size(); ++g)
      if (groups_[g]->summary) return {this, g, groups_[g]->next_nonempty(0), 0};
    return end();
  }

  void step_forward(iterator& it) const {
    const uint32_t g = it.group(), b = it.bin(), pos = it.pos() + 1;
    const Group& group = *groups_[g];
    if (pos < group.bins[b].size) {
      ++it.where_;
      return;
    }
    const uint32_t next = group.next_nonempty(b + 1);
    if (next != kNoBin) {
      it = iterator{this, g, next, 0};
      return;
    }
    it = first_from(g + 1);
  }

  // Steps back; from begin() it is undefined, as for any bidirectional iterator.
  void step_back(iterator& it) const {
    if (it.group() < groups_.size() && it.pos() > 0) {
      --it.where_;
      return;
    }
    uint32_t g = it.group();
    uint32_t from = g < groups_.size() ? it.bin() : kBins;
    if (g >= groups_.size()) g = static_cast<uint32_t>(groups_.size()) - 1, from = kBins;
    for (;;) {
      const uint32_t prev = groups_[g]->prev_nonempty(from);
      if (prev != kNoBin) {
        it = iterator{this, g, prev, groups_[g]->bins[prev].size - 1};
        return;
      }
      --g;
      from = kBins;
    }
  }

  std::vector<std::unique_ptr<Group>> groups_;
  size_t count_ = 0;
};

}  // namespace fraglab::detail
