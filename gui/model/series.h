// Per-event byte series of one replay (requested, allocated, reserved) and the min/max
// pyramid that lets the timeline draw millions of events as one min..max bar per pixel
// column without touching every event each frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace fraglab::gui {

// One value per trace event (reference events repeat the value before them), kept in
// KiB as uint32: 4 bytes an event instead of 8, exact to 1 KiB, range 4 TiB. The
// exact bytes at the cursor come from the cursor snapshot, not from here.
class ByteSeries {
 public:
  static uint32_t to_kib(uint64_t bytes) {
    uint64_t kib = (bytes + 1023) >> 10;
    return kib > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(kib);
  }
  static uint64_t to_bytes(uint32_t kib) { return static_cast<uint64_t>(kib) << 10; }

  void reserve(size_t n) { kib_.reserve(n); }
  // Sets the value at `index`, repeating the previous value over the events skipped.
  void set(uint64_t index, uint64_t bytes);
  // Pads with the last value up to `n` events.
  void finish(uint64_t n);

  size_t size() const { return kib_.size(); }
  uint64_t bytes_at(uint64_t index) const { return index < kib_.size() ? to_bytes(kib_[index]) : 0; }
  const std::vector<uint32_t>& kib() const { return kib_; }

 private:
  std::vector<uint32_t> kib_;
};

// Range min/max over a series in O(log n): level k holds the min and max of aligned
// blocks of 2^(k + kFirstLevel) values. Memory: about 1/8 of the series (two arrays
// that halve per level, starting at blocks of 16).
class MinMaxPyramid {
 public:
  static constexpr int kFirstLevel = 4;

  MinMaxPyramid() = default;
  explicit MinMaxPyramid(const std::vector<uint32_t>& values);
  // Signed variant (differences between two policies' series).
  explicit MinMaxPyramid(const std::vector<int32_t>& values);

  // Min and max over [begin, end); end is clamped to the size. {0, 0} when empty.
  std::pair<int64_t, int64_t> range(uint64_t begin, uint64_t end) const;
  size_t size() const { return n_; }

 private:
  template <class T>
  void build(const std::vector<T>& values);
  int64_t raw(uint64_t i) const {
    return raw_unsigned_ ? static_cast<int64_t>(raw_unsigned_[i]) : static_cast<int64_t>(raw_signed_[i]);
  }

  // The series' own buffer (its owner keeps it alive and unchanged; a moved vector keeps it).
  const uint32_t* raw_unsigned_ = nullptr;
  const int32_t* raw_signed_ = nullptr;
  size_t n_ = 0;
  std::vector<std::vector<int64_t>> min_, max_;
};

}  // namespace fraglab::gui
