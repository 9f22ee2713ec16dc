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

// Placed intervals indexed by time bucket, so that finding those that overlap a lifetime
// costs about the number live around it rather than all placed so far.
class TimeBuckets {
 public:
  TimeBuckets(uint64_t horizon, size_t count)
      : width_(std::max<uint64_t>(1, (horizon + count - 1) / std::max<size_t>(count, 1))),
        buckets_(horizon / width_ + 1) {}

  void add(uint32_t id, const Interval& iv) {
    for (uint64_t b = iv.start / width_; b <= last_bucket(iv); ++b) buckets_[b].push_back(id);
  }

  // Ids of placed intervals that may overlap `iv` (each once; callers check overlap).
  template <class Visit>
  void candidates(const Interval& iv, std::vector<uint32_t>& seen_stamp, uint32_t stamp, Visit&& visit) const {
    for (uint64_t b = iv.start / width_; b <= last_bucket(iv); ++b)
      for (uint32_t id : buckets_[b]) {
        if (seen_stamp[id] == stamp) continue;
        seen_stamp[id] = stamp;
        visit(id);
      }
  }

 private:
  uint64_t last_bucket(const Interval& iv) const { return (iv.end > iv.start ? iv.end - 1 : iv.start) / width_; }
  uint64_t width_;
  std::vector<std::vector<uint32_t>> buckets_;
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
  std::vector<std::pair<uint64_t, uint64_t>> taken;  // (offset, end) of overlapping placed intervals
  uint32_t round = 0;
  for (uint32_t id : order) {
    const Interval& iv = intervals[id];
    taken.clear();
    buckets.candidates(iv, stamp, ++round, [&](uint32_t other) {
      const Interval& o = intervals[other];
      if (o.start < iv.end && iv.start < o.end) taken.emplace_back(offset[other], offset[other] + o.size);
    });
    std::sort(taken.begin(), taken.end());
    // Best fit: the smallest gap between overlapping placed intervals that holds this one.
    uint64_t best = kUnplanned, best_gap = kUnplanned, top = 0;
    for (const auto& [start, end] : taken) {
      if (start > top && start - top >= iv.size && start - top < best_gap) {
        best_gap = start - top;
        best = top;
      }
      top = std::max(top, end);
    }
    offset[id] = best != kUnplanned ? best : top;
    plan.peak = std::max(plan.peak, offset[id] + iv.size);
    plan.offset_at[iv.start] = offset[id];
    plan.size_at[iv.start] = iv.size;
    buckets.add(id, iv);
  }
  return plan;
}

}  // namespace fraglab::detail
