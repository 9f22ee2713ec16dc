#include "gui/model/series.h"

#include <algorithm>
#include <bit>

namespace fraglab::gui {

void ByteSeries::set(uint64_t index, uint64_t bytes) {
  uint32_t last = kib_.empty() ? 0 : kib_.back();
  if (index >= kib_.size()) kib_.resize(index, last);
  if (index == kib_.size()) {
    kib_.push_back(to_kib(bytes));
  } else {
    kib_[index] = to_kib(bytes);
  }
}

void ByteSeries::finish(uint64_t n) {
  uint32_t last = kib_.empty() ? 0 : kib_.back();
  if (n > kib_.size()) kib_.resize(n, last);
}

MinMaxPyramid::MinMaxPyramid(const std::vector<uint32_t>& values) : raw_unsigned_(values.data()) { build(values); }
MinMaxPyramid::MinMaxPyramid(const std::vector<int32_t>& values) : raw_signed_(values.data()) { build(values); }

template <class T>
void MinMaxPyramid::build(const std::vector<T>& values) {
  n_ = values.size();
  size_t block = size_t{1} << kFirstLevel;
  // First level straight from the values, the rest by halving.
  std::vector<int64_t> lo, hi;
  for (size_t i = 0; i + block <= n_; i += block) {
    auto [mn, mx] = std::minmax_element(values.begin() + static_cast<ptrdiff_t>(i),
                                        values.begin() + static_cast<ptrdiff_t>(i + block));
    lo.push_back(*mn);
    hi.push_back(*mx);
  }
  while (!lo.empty()) {
    std::vector<int64_t> next_lo, next_hi;
    for (size_t i = 0; i + 1 < lo.size(); i += 2) {
      next_lo.push_back(std::min(lo[i], lo[i + 1]));
      next_hi.push_back(std::max(hi[i], hi[i + 1]));
    }
    min_.push_back(std::move(lo));
    max_.push_back(std::move(hi));
    lo = std::move(next_lo);
    hi = std::move(next_hi);
  }
}

std::pair<int64_t, int64_t> MinMaxPyramid::range(uint64_t begin, uint64_t end) const {
  end = std::min<uint64_t>(end, n_);
  if (begin >= end) return {0, 0};
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  auto take = [&](int64_t a, int64_t b) {
    lo = std::min(lo, a);
    hi = std::max(hi, b);
  };
  uint64_t i = begin;
  const uint64_t first_block = uint64_t{1} << kFirstLevel;
  while (i < end) {
    // The largest aligned block that starts at i and fits in [i, end).
    int align = i == 0 ? 63 : std::countr_zero(i);
    int fit = static_cast<int>(std::bit_width(end - i)) - 1;
    int level = std::min({align, fit, static_cast<int>(min_.size()) - 1 + kFirstLevel}) - kFirstLevel;
    if (level < 0) {
      take(raw(i), raw(i));
      ++i;
      continue;
    }
    uint64_t slot = i >> (kFirstLevel + level);
    take(min_[static_cast<size_t>(level)][slot], max_[static_cast<size_t>(level)][slot]);
    i += first_block << level;
  }
  return {lo, hi};
}

std::string ByteTicks::label(uint64_t value) const {
  if (value == 0) return "0";
  return std::to_string(value / unit) + " " + unit_name;
}

ByteTicks byte_ticks(uint64_t top, int most) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  ByteTicks t;
  most = std::max(most, 1);
  bool found = false;
  for (int u = 0; u < 5 && !found; ++u) {
    uint64_t unit = uint64_t{1} << (10 * u);
    for (uint64_t decade = 1; decade < 1024 && !found; decade *= 10)
      for (uint64_t m : {1, 2, 5}) {
        uint64_t step = m * decade * unit;
        if (top / step <= static_cast<uint64_t>(most)) {
          t.step = step, t.unit = unit, t.unit_name = kUnits[u];
          found = true;
          break;
        }
      }
  }
  if (!found) t.step = top / static_cast<uint64_t>(most) + 1, t.unit = uint64_t{1} << 40, t.unit_name = "TiB";
  for (uint64_t v = 0; v <= top; v += t.step) {
    t.values.push_back(v);
    if (v > top - t.step) break;  // no overflow past top
  }
  return t;
}

int64_t diff_extent(const MinMaxPyramid& diff, uint64_t begin, uint64_t end, uint64_t program_end) {
  uint64_t stop = program_end > begin ? std::min(end, program_end) : end;
  auto [lo, hi] = diff.range(begin, stop);
  return std::max<int64_t>({1, -lo, hi});
}

double event_column_center(const std::function<uint64_t(int)>& first_of, int columns, uint64_t e) {
  if (columns <= 0) return 0.0;
  // The last column whose first event is at or before e.
  int lo = 0, hi = columns;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (first_of(mid) > e)
      hi = mid;
    else
      lo = mid + 1;
  }
  int last = std::max(lo - 1, 0), first = last;
  if (first_of(last) == e) {  // zoomed in: every column starting at e draws it
    int l = 0, h = last;
    while (l < h) {
      int mid = l + (h - l) / 2;
      if (first_of(mid) >= e)
        h = mid;
      else
        l = mid + 1;
    }
    first = l;
  }
  return (static_cast<double>(first) + static_cast<double>(last)) / 2.0 + 0.5;
}

}  // namespace fraglab::gui
