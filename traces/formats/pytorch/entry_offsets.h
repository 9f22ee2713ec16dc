// EntryOffsets: each history entry's offset in the input, kept beside the entries for the errors found once the
// reading is done (an error names the entry's byte offset). A 2.4M-entry snapshot has 2.4M of them and nearly
// every one is never read: 4 bytes each while they fit (an input under 4 GiB, all but the largest pickles), 8
// once one does not. The peak of an import's memory is at the parse's end, where these sit beside the pickle,
// its memo and the events: 19 MB to 10 MB there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace fraglab {

class EntryOffsets {
 public:
  EntryOffsets() = default;
  EntryOffsets(size_t n, uint64_t offset) { resize(n, offset); }

  size_t size() const { return wide_ ? wide_offsets_.size() : narrow_.size(); }
  bool empty() const { return size() == 0; }
  void reserve(size_t n) { wide_ ? wide_offsets_.reserve(n) : narrow_.reserve(n); }
  void clear() { wide_ ? wide_offsets_.clear() : narrow_.clear(); }
  void resize(size_t n, uint64_t offset = 0) {
    if (!fits(offset)) widen();
    wide_ ? wide_offsets_.resize(n, offset) : narrow_.resize(n, static_cast<uint32_t>(offset));
  }

  uint64_t operator[](size_t i) const { return wide_ ? wide_offsets_[i] : narrow_[i]; }
  uint64_t back() const { return (*this)[size() - 1]; }
  void set(size_t i, uint64_t offset) {
    if (!fits(offset)) widen();
    if (wide_)
      wide_offsets_[i] = offset;
    else
      narrow_[i] = static_cast<uint32_t>(offset);
  }
  void push_back(uint64_t offset) {
    if (!fits(offset)) widen();
    if (wide_)
      wide_offsets_.push_back(offset);
    else
      narrow_.push_back(static_cast<uint32_t>(offset));
  }

  bool operator==(const EntryOffsets& other) const {
    if (size() != other.size()) return false;
    for (size_t i = 0; i < size(); ++i)
      if ((*this)[i] != other[i]) return false;
    return true;
  }

 private:
  bool fits(uint64_t offset) const { return wide_ || offset <= std::numeric_limits<uint32_t>::max(); }
  void widen() {
    wide_offsets_.assign(narrow_.begin(), narrow_.end());
    wide_offsets_.reserve(narrow_.capacity());
    narrow_ = {};
    wide_ = true;
  }

  bool wide_ = false;
  std::vector<uint32_t> narrow_;
  std::vector<uint64_t> wide_offsets_;
};

}  // namespace fraglab
