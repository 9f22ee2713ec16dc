// FreeSlots: the recycled indexes of a vector of records (blocks, nodes, physical
// allocations) whose index is an identity handed out (a Block::handle, a link), so records
// cannot move and a freed record's slot is reused instead. One small helper at the lowest
// layer, so the policies and the devices recycle the same way: the most recently freed slot
// first (its record is likely still in cache), else a new one at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fraglab {

// The index that names no record: the null link of every index-linked structure (block
// lists, trees, free lists) and what their searches return when nothing is found.
constexpr uint32_t kNoNode = UINT32_MAX;

class FreeSlots {
 public:
  // A slot of `records` for a new record: a freed one, else one appended (default-constructed).
  // The caller overwrites the record.
  template <class T>
  uint32_t take(std::vector<T>& records) {
    if (!free_.empty()) {
      uint32_t i = free_.back();
      free_.pop_back();
      return i;
    }
    records.emplace_back();
    return static_cast<uint32_t>(records.size() - 1);
  }
  // Slot `i` is free for reuse; its record stays as it was until then.
  void give_back(uint32_t i) { free_.push_back(i); }
  size_t size() const { return free_.size(); }

 private:
  std::vector<uint32_t> free_;
};

}  // namespace fraglab
