// AddrMap: address -> allocation id for the blocks live while a trace is read. Open
// addressing with linear probing and backward-shift deletion: one probe sequence in one
// flat array, no node per entry (std::unordered_map allocates one per insert, and this
// map sees an insert and an erase for every allocation of a multi-million-event trace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace fraglab {

class AddrMap {
 public:
  AddrMap() : slots_(64) {}

  // Inserts addr -> id; false (and nothing changed) when addr is already present.
  bool insert(uint64_t addr, uint32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();  // at most half full: short probe runs
    size_t i = find_slot(addr);
    if (slots_[i].used) return false;
    slots_[i] = {addr, id, true};
    ++size_;
    return true;
  }
  // The id under addr, or nullptr.
  const uint32_t* find(uint64_t addr) const {
    const Slot& s = slots_[find_slot(addr)];
    return s.used ? &s.id : nullptr;
  }
  // The same, to change in place (valid until the next insert).
  uint32_t* find(uint64_t addr) {
    Slot& s = slots_[find_slot(addr)];
    return s.used ? &s.id : nullptr;
  }
  // addr's id, `id` inserted where addr is absent, in one probe: {its id (valid until the next insert),
  // whether inserted}.
  std::pair<uint32_t*, bool> try_insert(uint64_t addr, uint32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    size_t i = find_slot(addr);
    if (slots_[i].used) return {&slots_[i].id, false};
    slots_[i] = {addr, id, true};
    ++size_;
    return {&slots_[i].id, true};
  }
  // Removes addr; false when absent.
  bool erase(uint64_t addr) {
    size_t i = find_slot(addr);
    if (!slots_[i].used) return false;
    // Backward shift: pull later members of the probe run into the hole, so lookups
    // never need tombstones.
    size_t mask = slots_.size() - 1;
    for (size_t j = (i + 1) & mask; slots_[j].used; j = (j + 1) & mask) {
      size_t home = hash(slots_[j].addr) & mask;
      if (((j - home) & mask) >= ((j - i) & mask)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].used = false;
    --size_;
    return true;
  }
  size_t size() const { return size_; }
  // addr's slot asked for ahead of a lookup (the table is larger than the caches: each lookup a miss).
  void prefetch(uint64_t addr) const { __builtin_prefetch(&slots_[hash(addr) & (slots_.size() - 1)]); }

 private:
  struct Slot {
    uint64_t addr = 0;
    uint32_t id = 0;
    bool used = false;
  };
  static uint64_t hash(uint64_t a) {  // addresses share low zero bits: mix them (splitmix64 finalizer)
    a ^= a >> 30;
    a *= 0xbf58476d1ce4e5b9ull;
    a ^= a >> 27;
    a *= 0x94d049bb133111ebull;
    return a ^ (a >> 31);
  }
  size_t find_slot(uint64_t addr) const {
    size_t mask = slots_.size() - 1;
    size_t i = hash(addr) & mask;
    while (slots_[i].used && slots_[i].addr != addr) i = (i + 1) & mask;
    return i;
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (const Slot& s : old)
      if (s.used) insert(s.addr, s.id);
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace fraglab
