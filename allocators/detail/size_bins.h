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
#include <utility>
#include <vector>

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

  SizeBins() : bins_(kBins) {}

  void insert(uint32_t node, uint64_t size, Addr addr) {
    uint32_t b = bin_of(size);
    auto& bin = bins_[b];
    const Entry e{size, addr, node};
    if (bin.size() > kShortBin || bin.size() == bin.capacity()) [[unlikely]] {
      insert_slow(bin, e);
    } else {
      // Insertion sort's step: the entries after e move up one as the scan from the back passes them.
      bin.emplace_back();
      Entry* a = bin.data();
      size_t j = bin.size() - 1;
      for (; j > 0 && stored_before(e, a[j - 1]); --j) a[j] = a[j - 1];
      a[j] = e;
    }
    words_[b / 64] |= 1ull << (b % 64);
    summary_ |= 1ull << (b / 64);
    ++count_;
  }

  void erase(uint64_t size, Addr addr) {
    uint32_t b = bin_of(size);
    auto& bin = bins_[b];
    if (bin.size() > kShortBin) {
      bin.erase(std::lower_bound(bin.begin(), bin.end(), Entry{size, addr, 0}, stored_before));
    } else {
      // From the back, each entry passed moves down one until the erased one (the only free block
      // at its address) is overwritten.
      Entry* a = bin.data();
      size_t j = bin.size() - 1;
      Entry moving = a[j];
      while (moving.addr != addr) std::swap(moving, a[--j]);
      bin.pop_back();
    }
    if (bin.empty()) clear_bit(b);
    --count_;
  }

  // The smallest block of at least `size` bytes (lowest address among equals), or kNoNode.
  uint32_t best_fit(uint64_t size) const {
    Spot at = locate_best_fit(size);
    return at.bin == kNoBin ? kNoNode : at.it->node;
  }

  // best_fit(size) and erase() of what it found in one search (the allocation path).
  uint32_t take_best_fit(uint64_t size) {
    Spot at = locate_best_fit(size);
    if (at.bin == kNoBin) return kNoNode;
    uint32_t node = at.it->node;
    auto& bin = bins_[at.bin];
    if (bin.size() > kShortBin) {
      bin.erase(at.it);
    } else {
      Entry* a = bin.data();
      const size_t pos = static_cast<size_t>(at.it - bin.begin());
      size_t j = bin.size() - 1;
      Entry moving = a[j];
      while (j > pos) std::swap(moving, a[--j]);
      bin.pop_back();
    }
    if (bin.empty()) clear_bit(at.bin);
    --count_;
    return node;
  }

  // The largest block (lowest address among equals), or kNoNode when empty.
  uint32_t largest() const {
    if (summary_ == 0) return kNoNode;
    uint32_t w = 63 - static_cast<uint32_t>(std::countl_zero(summary_));
    uint32_t b = w * 64 + 63 - static_cast<uint32_t>(std::countl_zero(words_[w]));
    const auto& bin = bins_[b];
    if constexpr (kLayout == BinLayout::Ascending) {
      // The first entry of the largest size.
      return std::lower_bound(bin.begin(), bin.end(), Entry{bin.back().size, 0, 0})->node;
    } else {
      // The last entry of the largest size.
      const uint64_t top = bin.front().size;
      return std::prev(std::partition_point(bin.begin(), bin.end(), [top](const Entry& e) { return e.size == top; }))
          ->node;
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
  static constexpr size_t kShortBin = 32;

  // Where the best fit for `size` is: the smallest entry of at least `size` bytes in its own bin,
  // else the smallest of the next non-empty bin (bin kNoBin when there is none).
  struct Spot {
    uint32_t bin;
    typename std::vector<Entry>::const_iterator it;
  };
  Spot locate_best_fit(uint64_t size) const {
    uint32_t b = bin_of(size);
    const auto& bin = bins_[b];
    if constexpr (kLayout == BinLayout::Ascending) {
      auto it = bin.begin();
      if (bin.size() > kShortBin) {
        it = std::lower_bound(bin.begin(), bin.end(), Entry{size, 0, 0});
      } else {
        while (it != bin.end() && it->size < size) ++it;
      }
      if (it != bin.end()) return {b, it};
      const uint32_t next = next_nonempty(b + 1);
      if (next != kNoBin) return {next, bins_[next].begin()};
    } else {
      auto it = bin.end();  // one past the fit
      if (bin.size() > kShortBin) {
        it = std::partition_point(bin.begin(), bin.end(), [size](const Entry& e) { return e.size >= size; });
      } else {
        while (it != bin.begin() && std::prev(it)->size < size) --it;
      }
      if (it != bin.begin()) return {b, std::prev(it)};
      const uint32_t next = next_nonempty(b + 1);
      if (next != kNoBin) return {next, std::prev(bins_[next].end())};
    }
    return {kNoBin, {}};
  }

  // A long bin's insert, or one that must grow the bin: out of line, so that the short path (most
  // inserts, run on every split and free) saves no registers for a binary search and a reallocation.
  [[gnu::noinline]] static void insert_slow(std::vector<Entry>& bin, const Entry& e) {
    bin.insert(std::lower_bound(bin.begin(), bin.end(), e, stored_before), e);
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
    return kLayout == BinLayout::Ascending ? bins_[b].back() : bins_[b].front();
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

  std::vector<std::vector<Entry>> bins_;
  std::array<uint64_t, kWords> words_{};  // in the object: one load less than a vector's
  uint64_t summary_ = 0;
  size_t count_ = 0;
};

}  // namespace fraglab::detail
