// AddressTable: a hash table from addresses to small values, for lookups that need no order.
//
// A device must know each live segment's size (to refuse a wrong free) and an address model what
// each address took: exact lookups, one insert and one erase per segment, on every device call of a
// passthrough replay. std::unordered_map allocates a node per entry; Debian offers no flat hash map
// among fraglab's dependencies (abseil's is not packaged as a header library there), so this is
// open addressing with linear probing in one array: power-of-two capacity kept at most half full,
// Fibonacci hashing (addresses are multiples of 512, so their low bits say nothing), and
// backward-shift deletion, so no tombstones build up. An address of all ones marks a free slot: no
// device address reaches it (they lie below 2^48).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

template <class V>
class AddressTable {
 public:
  AddressTable() : slots_(size_t{1} << kMinLog2) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  V* find(Addr key) {
    for (size_t i = home(key);; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kFree) return nullptr;
    }
  }
  const V* find(Addr key) const { return const_cast<AddressTable*>(this)->find(key); }

  // Inserts (key, value) unless the key is present; true when inserted.
  bool emplace(Addr key, V value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (size_t i = home(key);; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return false;
      if (slots_[i].key == kFree) {
        slots_[i] = {key, std::move(value)};
        ++size_;
        return true;
      }
    }
  }

  // Removes the key; false when absent.
  bool erase(Addr key) {
    size_t i = home(key);
    for (;; i = (i + 1) & mask()) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == kFree) return false;
    }
    // Backward shift: every entry of the probe run after the hole that may move into it does.
    for (size_t j = (i + 1) & mask(); slots_[j].key != kFree; j = (j + 1) & mask()) {
      size_t h = home(slots_[j].key);
      if (((j - h) & mask()) >= ((j - i) & mask())) {
        slots_[i] = std::move(slots_[j]);
        i = j;
      }
    }
    slots_[i].key = kFree;
    --size_;
    return true;
  }

 private:
  static constexpr Addr kFree = ~Addr{0};
  static constexpr unsigned kMinLog2 = 4;
  struct Slot {
    Addr key = kFree;
    V value{};
  };

  size_t mask() const { return slots_.size() - 1; }
  size_t home(Addr key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - log2_)); }

  void grow() {
    std::vector<Slot> old(size_t{1} << (log2_ + 1));
    old.swap(slots_);
    ++log2_;
    size_ = 0;
    for (Slot& s : old)
      if (s.key != kFree) emplace(s.key, std::move(s.value));
  }

  std::vector<Slot> slots_;
  unsigned log2_ = kMinLog2;
  size_t size_ = 0;
};

}  // namespace fraglab
