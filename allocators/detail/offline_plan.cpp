#include "allocators/detail/offline_plan.h"

#include <algorithm>

namespace fraglab::detail {

namespace {

struct Interval {
  uint64_t start, end;  // [alloc position, free position)
  uint64_t size;
};

std::vector<Interval> lifetimes(const std::vector<Event>& events, uint64_t align, uint64_t limit) {
  std::vector<Interval> out;
  std::vector<uint32_t> open;  // allocation id -> index into out (+1; 0 = none)
  for (uint64_t i = 0; i < limit; ++i) {
    const Event& e = events[i];
    if (e.kind == EventKind::Alloc) {
      if (e.id >= open.size()) open.resize(e.id + 1, 0);
      uint64_t size = (std::max<uint64_t>(e.size, 1) + align - 1) / align * align;
      out.push_back({i, limit, size});
      open[e.id] = static_cast<uint32_t>(out.size());
    } else if (e.kind == EventKind::Free && e.id < open.size() && open[e.id]) {
      out[open[e.id] - 1].end = i;
      open[e.id] = 0;
    }
  }
  return out;
}

// Placed intervals indexed by time bucket, each bucket kept in offset order, so that the
// placed intervals overlapping a lifetime come out in offset order at about the cost of the
// live set around it (no per-query sort when the lifetime lies in one bucket, the usual case).
class TimeBuckets {
 public:
  struct Entry {
    uint64_t offset, end;  // placed [offset, end) in memory
    uint32_t id;
  };

  TimeBuckets(uint64_t horizon, size_t count)
      : width_(std::max<uint64_t>(1, (horizon + count - 1) / std::max<size_t>(count, 1))),
        buckets_(horizon / width_ + 1) {}

  void add(uint32_t id, const Interval& iv, uint64_t offset) {
    Entry e{offset, offset + iv.size, id};
    for (uint64_t b = iv.start / width_; b <= last_bucket(iv); ++b) {
      auto& list = buckets_[b];
      auto at = std::upper_bound(list.begin(), list.end(), e,
                                 [](const Entry& x, const Entry& y) { return x.offset < y.offset; });
      list.insert(at, e);
    }
  }

  // The placed intervals that may overlap `iv`, in offset order (callers check overlap).
  const std::vector<Entry>& candidates(const Interval& iv, std::vector<uint32_t>& seen_stamp, uint32_t stamp) {
    uint64_t first = iv.start / width_, last = last_bucket(iv);
    if (first == last) return buckets_[first];
    merged_.clear();
    for (uint64_t b = first; b <= last; ++b)
      for (const Entry& e : buckets_[b]) {
        if (seen_stamp[e.id] == stamp) continue;
        seen_stamp[e.id] = stamp;
        merged_.push_back(e);
      }
    std::sort(merged_.begin(), merged_.end(), [](const Entry& x, const Entry& y) { return x.offset < y.offset; });
    return merged_;
  }

 private:
  uint64_t last_bucket(const Interval& iv) const { return (iv.end > iv.start ? iv.end - 1 : iv.start) / width_; }
  uint64_t width_;
  std::vector<std::vector<Entry>> buckets_;
  std::vector<Entry> merged_;
};

}  // namespace

OfflinePlan plan_greedy_by_size(const std::vector<Event>& events, uint64_t align, uint64_t limit) {
  limit = std::min<uint64_t>(limit, events.size());
  std::vector<Interval> intervals = lifetimes(events, align, limit);
  std::vector<uint32_t> order(intervals.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return intervals[a].size > intervals[b].size; });

  OfflinePlan plan;
  plan.offset_at.assign(limit, kUnplanned);
  plan.size_at.assign(limit, 0);
  std::vector<uint64_t> offset(intervals.size(), 0);
  TimeBuckets buckets(limit, 4096);
  std::vector<uint32_t> stamp(intervals.size(), 0);
  uint32_t round = 0;
  for (uint32_t id : order) {
    const Interval& iv = intervals[id];
    // Best fit: the smallest gap between overlapping placed intervals that holds this one.
    uint64_t best = kUnplanned, best_gap = kUnplanned, top = 0;
    for (const auto& e : buckets.candidates(iv, stamp, ++round)) {
      const Interval& o = intervals[e.id];
      if (!(o.start < iv.end && iv.start < o.end)) continue;
      if (e.offset > top && e.offset - top >= iv.size && e.offset - top < best_gap) {
        best_gap = e.offset - top;
        best = top;
      }
      top = std::max(top, e.end);
    }
    offset[id] = best != kUnplanned ? best : top;
    plan.peak = std::max(plan.peak, offset[id] + iv.size);
    plan.offset_at[iv.start] = offset[id];
    plan.size_at[iv.start] = iv.size;
    buckets.add(id, iv, offset[id]);
  }
  return plan;
}

}  // namespace fraglab::detail
