// Per-event byte series of one replay (requested, allocated, reserved) and the min/max
// pyramid that lets the timeline draw millions of events as one min..max bar per pixel
// column without touching every event each frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
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

// The half-height of a plot of differences between two lanes over events [begin, end) (KiB, at least 1): the
// largest magnitude among the events up to `program_end` (one past the program's last allocation or free). What
// follows it is the lanes' exits, not the program (a recording emptying its cache after the last allocation
// while a model keeps it): it is drawn clipped, not allowed to flatten the real difference. The whole visible
// range decides when it lies past the program's end.
int64_t diff_extent(const MinMaxPyramid& diff, uint64_t begin, uint64_t end, uint64_t program_end);

// Round ticks for a byte axis from 0 to `top`: steps of 1, 2 or 5 times a power of ten of one binary
// unit (B, KiB, MiB, GiB, TiB; 1, 2, 5, ... 500 MiB, then 1 GiB), at most `most` ticks past 0, labelled in
// that unit ("500 MiB", "1000 MiB"), so no tick reads 522.18 MiB.
struct ByteTicks {
  uint64_t step = 1, unit = 1;
  const char* unit_name = "B";
  std::vector<uint64_t> values;  // 0, step, 2 step, ... <= top
  std::string label(uint64_t value) const;
};
ByteTicks byte_ticks(uint64_t top, int most = 5);

// Where a plot draws event `e`, in columns (the center of a pixel column): a plot whose column c
// draws events [first_of(c), first_of(c + 1)) (first_of non-decreasing over [0, columns]) draws e in
// the column holding it, or, zoomed in past one event a column, in the columns whose first event is e
// (their middle). Markers and the cursor drawn there lie on the spike or tick they name.
double event_column_center(const std::function<uint64_t(int)>& first_of, int columns, uint64_t e);

}  // namespace fraglab::gui
