// SizeBins: free blocks ordered by (size, address), for exact best fit and worst fit.
//
// An ordered multimap (std::set of (size, address), what bestfit used first) costs a heap
// allocation and a pointer chase per level on every insert and erase, and dominated
// replay time. Here blocks are binned by size first, TLSF-style (Masmano et al. 2004):
// 512-byte steps below 16 KiB, then 32 linear bins per power of two, with a two-level
// bitmap of non-empty bins; each bin is a small vector kept sorted by (size, address).
// Every block in a higher bin is larger than every block in a lower one, so the best fit
// is the smallest entry of at least the request's size in its own bin or else the smallest
// of the next non-empty bin (found with two count-trailing-zeros), and the order is
// exactly that of the multimap: smallest size, then lowest address.
// A bin is stored in the order that puts what its user takes at or near the back, where
// leaving moves little: ascending for worst fit (it takes a bin's largest), descending for
// best fit, whose fits come three times in four from a higher bin's smallest entry (in
// ascending order the whole bin moved down one for it: on bert_varlen_train, most of the
// entries moved). Either order is the same (size, address) order read from one end or the other,
// so the blocks chosen are the same. Inserts and erases move at most one
// bin's entries; DNN traces hold few free blocks per 3%-wide bin (on bert_varlen_train
// and a random trace, half the inserts find the bin empty and 85-96% find fewer than 16
// entries), so a short bin is searched and shifted in one linear pass, and only a long
// one pays a binary search and a memmove call.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "allocators/detail/key_bin.h"
#include "traces/free_slots.h"
#include "traces/trace.h"

namespace fraglab::detail {

// How a bin's entries lie in memory (the order they stand for is (size, address) either way).
enum class BinLayout {
  Ascending,   // smallest first: the largest blocks lie at the back (worst fit)
  Descending,  // largest first: the smallest blocks lie at the back (best fit)
};

template <BinLayout kLayout>
class SizeBins {
 public:
  struct Entry {
    uint64_t size;
    Addr addr;
    uint32_t node;
    friend bool operator<(const Entry& a, const Entry& b) {
      return a.size != b.size ? a.size < b.size : a.addr < b.addr;
    }
  };

  SizeBins() : bins_(std::make_unique<Bin[]>(kBins)) {}
  SizeBins(SizeBins&&) noexcept = default;
  SizeBins& operator=(SizeBins&& other) noexcept {
    release();
    bins_ = std::move(other.bins_);
    words_ = other.words_;
    summary_ = std::exchange(other.summary_, 0);
    count_ = std::exchange(other.count_, 0);
    return *this;
  }
  ~SizeBins() { release(); }

  void insert(uint32_t node, uint64_t size, Addr addr) {
    uint32_t b = bin_of(size);
    Bin& bin = bins_[b];
    const Entry e{size, addr, node};
    if (bin.size == bin.cap) bin.grow();
    if (bin.size > kShortBin) [[unlikely]] {
      insert_long(bin, e);
    } else {
      // Insertion sort's step: the entries after e move up one as the scan from the back passes them.
      Entry* a = bin.keys;
      uint32_t j = bin.size++;
      for (; j > 0 && stored_before(e, a[j - 1]); --j) a[j] = a[j - 1];
      a[j] = e;
    }
    words_[b / 64] |= 1ull << (b % 64);
    summary_ |= 1ull << (b / 64);
    ++count_;
  }

  void erase(uint64_t size, Addr addr) {
    uint32_t b = bin_of(size);
    Bin& bin = bins_[b];
    if (bin.size > kShortBin) {
      remove_at(bin,
                static_cast<uint32_t>(
                    std::lower_bound(bin.keys, bin.keys + bin.size, Entry{size, addr, 0}, stored_before) - bin.keys));
    } else {
      // From the back, each entry passed moves down one until the erased one (the only free block
      // at its address) is overwritten.
      Entry* a = bin.keys;
      uint32_t j = bin.size - 1;
      Entry moving = a[j];
      while (moving.addr != addr) std::swap(moving, a[--j]);
      --bin.size;
    }
    if (bin.size == 0) clear_bit(b);
    --count_;
  }

  // The smallest block of at least `size` bytes (lowest address among equals), or kNoNode.
  uint32_t best_fit(uint64_t size) const {
    Spot at = locate_best_fit(size);
    return at.bin == kNoBin ? kNoNode : bins_[at.bin].keys[at.pos].node;
  }

  // best_fit(size) and erase() of what it found in one search (the allocation path).
  uint32_t take_best_fit(uint64_t size) {
    Spot at = locate_best_fit(size);
    if (at.bin == kNoBin) return kNoNode;
    Bin& bin = bins_[at.bin];
    uint32_t node = bin.keys[at.pos].node;
    if (bin.size > kShortBin) {
      remove_at(bin, at.pos);
    } else {
      Entry* a = bin.keys;
      uint32_t j = bin.size - 1;
      Entry moving = a[j];
      while (j > at.pos) std::swap(moving, a[--j]);
      --bin.size;
    }
    if (bin.size == 0) clear_bit(at.bin);
    --count_;
    return node;
  }

  // The largest block (lowest address among equals), or kNoNode when empty.
  uint32_t largest() const {
    if (summary_ == 0) return kNoNode;
    uint32_t w = 63 - static_cast<uint32_t>(std::countl_zero(summary_));
    uint32_t b = w * 64 + 63 - static_cast<uint32_t>(std::countl_zero(words_[w]));
    const Bin& bin = bins_[b];
    const Entry* first = bin.keys;
    const Entry* end = first + bin.size;
    if constexpr (kLayout == BinLayout::Ascending) {
      // The first entry of the largest size.
      return std::lower_bound(first, end, Entry{end[-1].size, 0, 0})->node;
    } else {
      // The last entry of the largest size.
      const uint64_t top = bin.keys[0].size;
      return std::prev(std::partition_point(first, end, [top](const Entry& e) { return e.size == top; }))->node;
    }
  }
  uint64_t largest_size() const { return summary_ ? largest_entry().size : 0; }

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }

  static uint32_t bin_of(uint64_t size) {
    if (size < kLinearLimit) return static_cast<uint32_t>(size >> kLinearShift);
    uint32_t fl = 63 - static_cast<uint32_t>(std::countl_zero(size));
    uint32_t sl = static_cast<uint32_t>(size >> (fl - kSubBinsLog2)) & (kSubBins - 1);
    return kLinearBins + (fl - kLinearLimitLog2) * kSubBins + sl;
  }

 private:
  static constexpr uint32_t kLinearShift = 9;  // 512-byte steps below kLinearLimit
  static constexpr uint32_t kSubBinsLog2 = 5;
  static constexpr uint32_t kSubBins = 1u << kSubBinsLog2;
  static constexpr uint32_t kLinearLimitLog2 = kLinearShift + kSubBinsLog2;  // 16 KiB
  static constexpr uint64_t kLinearLimit = 1ull << kLinearLimitLog2;
  static constexpr uint32_t kLinearBins = kSubBins;
  static constexpr uint32_t kBins = kLinearBins + (64 - kLinearLimitLog2) * kSubBins;
  static constexpr uint32_t kWords = (kBins + 63) / 64;
  static_assert(kWords <= 64, "the summary word covers at most 64 bitmap words");
  static constexpr uint32_t kNoBin = UINT32_MAX;
  // Up to this many entries a bin is searched and shifted in one linear pass (no binary search, no
  // memmove call): most bins hold a handful of blocks, where the pass is a few instructions. At 32
  // rather than 16 bestfit replayed 3-4% faster on bert_varlen_train and a 10M random trace (64 was
  // no better).
  static constexpr uint32_t kShortBin = 32;

  // Where the best fit for `size` is: the smallest entry of at least `size` bytes in its own bin,
  // else the smallest of the next non-empty bin (bin kNoBin when there is none).
  struct Spot {
    uint32_t bin;
    uint32_t pos;
  };
  Spot locate_best_fit(uint64_t size) const {
    uint32_t b = bin_of(size);
    const Bin& bin = bins_[b];
    const Entry* const first = bin.keys;
    const Entry* const end = first + bin.size;
    if constexpr (kLayout == BinLayout::Ascending) {
      const Entry* it = first;
      if (bin.size > kShortBin) {
        it = std::lower_bound(first, end, Entry{size, 0, 0});
      } else {
        while (it != end && it->size < size) ++it;
      }
      if (it != end) return {b, static_cast<uint32_t>(it - first)};
      const uint32_t next = next_nonempty(b + 1);
      if (next != kNoBin) return {next, 0};
    } else {
      const Entry* it = end;  // one past the fit
      if (bin.size > kShortBin) {
        it = std::partition_point(first, end, [size](const Entry& e) { return e.size >= size; });
      } else {
        while (it != first && it[-1].size < size) --it;
      }
      if (it != first) return {b, static_cast<uint32_t>(it - first) - 1};
      const uint32_t next = next_nonempty(b + 1);
      if (next != kNoBin) return {next, bins_[next].size - 1};
    }
    return {kNoBin, 0};
  }

  // As in OrderedKeys (a std::vector per bin divided by the 24-byte entry for each size(): bestfit,
  // worstfit and slab 2-3% slower on the generated random trace, alternated).
  using Bin = KeyBin<Entry>;

  // Out of line, so that the short path (most inserts, run on every split and free) saves no
  // registers for a binary search, a memmove or a reallocation.
  [[gnu::noinline]] static void insert_long(Bin& bin, const Entry& e) {
    Entry* at = std::lower_bound(bin.keys, bin.keys + bin.size, e, stored_before);
    std::memmove(static_cast<void*>(at + 1), at, static_cast<size_t>(bin.keys + bin.size - at) * sizeof(Entry));
    *at = e;
    ++bin.size;
  }
  static void remove_at(Bin& bin, uint32_t pos) {
    std::memmove(static_cast<void*>(bin.keys + pos), bin.keys + pos + 1, (bin.size - pos - 1) * sizeof(Entry));
    --bin.size;
  }
  void release() {
    if (!bins_) return;
    for (uint32_t b = 0; b < kBins; ++b) bins_[b].release();
    bins_.reset();
  }

  // Whether entry `a` lies before entry `b` in a bin.
  static bool stored_before(const Entry& a, const Entry& b) { return kLayout == BinLayout::Ascending ? a < b : b < a; }

  void clear_bit(uint32_t b) {
    words_[b / 64] &= ~(1ull << (b % 64));
    if (words_[b / 64] == 0) summary_ &= ~(1ull << (b / 64));
  }

  const Entry& largest_entry() const {
    uint32_t w = 63 - static_cast<uint32_t>(std::countl_zero(summary_));
    uint32_t b = w * 64 + 63 - static_cast<uint32_t>(std::countl_zero(words_[w]));
    return kLayout == BinLayout::Ascending ? bins_[b].keys[bins_[b].size - 1] : bins_[b].keys[0];
  }

  // The first non-empty bin at or after `b`, or kNoBin.
  uint32_t next_nonempty(uint32_t b) const {
    if (b >= kBins) return kNoBin;
    uint32_t w = b / 64;
    uint64_t bits = words_[w] & (~0ull << (b % 64));
    if (bits) return w * 64 + static_cast<uint32_t>(std::countr_zero(bits));
    uint64_t higher = (w + 1 < 64) ? summary_ & (~0ull << (w + 1)) : 0;
    if (!higher) return kNoBin;
    w = static_cast<uint32_t>(std::countr_zero(higher));
    return w * 64 + static_cast<uint32_t>(std::countr_zero(words_[w]));
  }

  std::unique_ptr<Bin[]> bins_;
  std::array<uint64_t, kWords> words_{};  // in the object: one load less than a vector's
  uint64_t summary_ = 0;
  size_t count_ = 0;
};

}  // namespace fraglab::detail
