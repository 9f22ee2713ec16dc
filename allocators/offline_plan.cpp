#include "allocators/offline_plan.h"

#include <algorithm>
#include <memory>
#include <mutex>

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

// Placed intervals in a segment tree over time (leaves are buckets of trace positions). An
// interval is stored at the O(log) canonical nodes that cover its buckets, so a long-lived
// allocation costs a few entries, not one per bucket. A query visits the nodes whose range
// meets the lifetime (skipping empty subtrees), keeps the entries that really overlap it in
// time and merges them by offset (each node's list is kept in offset order, so the query
// merges a few sorted runs instead of sorting): the cost follows the number of allocations
// live beside it.
// (A bucket list per time slot, the first version, stored long lifetimes in every bucket they
// crossed: 3.5M entries and ~10 s for bert_varlen_train's 60K allocations.)
class TimeTree {
 public:
  // An interval's lifetime travels with it: the query filters every entry it visits on it, and a
  // lookup in the intervals by id was a cache miss each (on a 10M-event trace the filter was a third
  // of the plan's time).
  struct Entry {
    uint64_t offset, end;  // placed [offset, end) in memory
    uint64_t start, stop;  // its lifetime [start, stop)
  };
  // What a query returns of an entry: the gap search reads only where it lies (half the bytes to merge).
  struct Placed {
    uint64_t offset, end;
  };

  TimeTree(uint64_t horizon, uint64_t leaves) {
    leaves_ = 1;
    while (leaves_ < leaves) leaves_ *= 2;
    width_ = std::max<uint64_t>(1, (horizon + leaves_ - 1) / leaves_);
    while ((horizon + width_ - 1) / width_ < leaves_ / 2 && leaves_ > 1) leaves_ /= 2;  // no idle leaves
    nodes_.resize(2 * leaves_);
    subtree_.assign(2 * leaves_, 0);
  }

  void add(const Interval& iv, uint64_t offset) {
    Entry e{offset, offset + iv.size, iv.start, iv.end};
    insert(1, 0, leaves_ - 1, first_leaf(iv), last_leaf(iv), e);
  }

  uint64_t work() const { return work_; }  // entries visited by all queries so far

  // The placed intervals overlapping `iv` in time, in offset order, each once.
  const std::vector<Placed>& overlapping(const Interval& iv) {
    found_.clear();
    runs_.assign(1, 0);
    const uint64_t a = first_leaf(iv);
    collect(1, 0, leaves_ - 1, a, last_leaf(iv), iv);
    return merge_runs();
  }

 private:
  uint64_t first_leaf(const Interval& iv) const { return std::min(iv.start / width_, leaves_ - 1); }
  uint64_t last_leaf(const Interval& iv) const {
    return std::min((iv.end > iv.start ? iv.end - 1 : iv.start) / width_, leaves_ - 1);
  }

  void insert(uint64_t node, uint64_t lo, uint64_t hi, uint64_t a, uint64_t b, const Entry& e) {
    ++subtree_[node];
    if (a <= lo && hi <= b) {
      auto& list = nodes_[node];
      list.insert(std::upper_bound(list.begin(), list.end(), e, by_offset), e);
      return;
    }
    uint64_t mid = (lo + hi) / 2;
    if (a <= mid) insert(2 * node, lo, mid, a, b, e);
    if (b > mid) insert(2 * node + 1, mid + 1, hi, a, b, e);
  }

  // An interval stored at several nodes (they tile its leaves, each node wholly covered) that overlaps
  // `iv` is reported at the first of them the query visits, the query visiting nodes in time order:
  // where the query's first leaf `a` lies in this node, every overlapping entry; otherwise only those
  // whose lifetime starts in this node (its first node; the others lie before it, outside the query).
  // A stamp per interval, checked at every overlap, did the same at a cache miss each.
  void collect(uint64_t node, uint64_t lo, uint64_t hi, uint64_t a, uint64_t b, const Interval& iv) {
    if (subtree_[node] == 0) return;
    work_ += nodes_[node].size();
    const uint64_t from = a >= lo ? 0 : lo * width_;  // lifetimes reported here start at or after
    for (const Entry& e : nodes_[node])
      if (e.start < iv.end && iv.start < e.stop && e.start >= from) found_.push_back({e.offset, e.end});
    if (found_.size() != runs_.back()) runs_.push_back(found_.size());
    if (lo == hi) return;
    uint64_t mid = (lo + hi) / 2;
    if (a <= mid) collect(2 * node, lo, mid, a, b, iv);
    if (b > mid) collect(2 * node + 1, mid + 1, hi, a, b, iv);
  }

  static bool by_offset(const Entry& x, const Entry& y) { return x.offset < y.offset; }
  static bool placed_below(const Placed& x, const Placed& y) { return x.offset < y.offset; }

  // found_ holds sorted runs [runs_[i], runs_[i+1]); merges them pairwise, bottom-up.
  const std::vector<Placed>& merge_runs() {
    std::vector<Placed>* from = &found_;
    std::vector<Placed>* to = &spare_;
    while (runs_.size() > 2) {
      to->resize(from->size());
      std::vector<size_t>& next = next_runs_;
      next.assign(1, 0);
      size_t i = 0;
      for (; i + 2 < runs_.size(); i += 2) {
        std::merge(from->begin() + runs_[i], from->begin() + runs_[i + 1], from->begin() + runs_[i + 1],
                   from->begin() + runs_[i + 2], to->begin() + runs_[i], placed_below);
        next.push_back(runs_[i + 2]);
      }
      if (i + 1 < runs_.size()) {  // an odd run out: copied as it is
        std::copy(from->begin() + runs_[i], from->begin() + runs_[i + 1], to->begin() + runs_[i]);
        next.push_back(runs_[i + 1]);
      }
      runs_.swap(next);
      std::swap(from, to);
    }
    return *from;
  }

  uint64_t leaves_ = 1, width_ = 1, work_ = 0;
  std::vector<std::vector<Entry>> nodes_;
  std::vector<uint32_t> subtree_;  // entries stored in each node's subtree (empty ones are skipped)
  std::vector<Placed> found_, spare_;
  std::vector<size_t> runs_;       // run boundaries in found_
  std::vector<size_t> next_runs_;  // merge_runs' next round (kept: a vector a round was an allocation)
};

// The fallback past the work bound: the highest placed end among intervals overlapping a
// lifetime, in O(log n). Two half-open lifetimes overlap exactly when one's start lies in
// the other, so the tree covers the allocations' start positions (intervals are in start
// order: an interval's index is its start's rank): an interval raises the top over the
// starts it covers and asks for the top over the same starts.
// Bottom-up and iterative (leaves at [size, 2 size)): the recursive tree over 4n nodes it replaces
// spent more on calls and on visiting both children of every node than on the maxima.
// A raise marks the O(log n) nodes that tile its range and refreshes their ancestors; a query takes
// the maxima of the tiling nodes and the tags of every ancestor of the range's two ends (each tiling
// node's ancestors lie on those two paths, and every node on them covers an end of the range).
class TopTree {
 public:
  explicit TopTree(const std::vector<Interval>& intervals) {
    // Each interval's last covered start, found once in start order (neighbouring searches share their
    // cache lines) rather than twice per interval in size order (a cold binary search over all starts).
    std::vector<uint64_t> starts;
    starts.reserve(intervals.size());
    for (const auto& iv : intervals) starts.push_back(iv.start);
    last_.reserve(intervals.size());
    for (const auto& iv : intervals) {
      auto hi = static_cast<size_t>(std::lower_bound(starts.begin(), starts.end(), iv.end) - starts.begin());
      last_.push_back(static_cast<uint32_t>(hi == 0 ? 0 : hi - 1));
    }
    while (size_ < std::max<size_t>(intervals.size(), 1)) size_ *= 2;
    max_.assign(2 * size_, 0);
    tag_.assign(2 * size_, 0);
  }
  uint64_t top(uint32_t id) const {
    size_t lo = id + size_, hi = last_[id] + size_;
    if (hi < lo) return 0;
    uint64_t best = 0;
    for (size_t v = lo >> 1; v; v >>= 1) best = std::max(best, tag_[v]);
    for (size_t v = hi >> 1; v; v >>= 1) best = std::max(best, tag_[v]);
    for (++hi; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1) best = std::max(best, max_[lo++]);
      if (hi & 1) best = std::max(best, max_[--hi]);
    }
    return best;
  }
  void raise(uint32_t id, uint64_t end) {
    const size_t first = id + size_, last_leaf = last_[id] + size_;
    if (last_leaf < first) return;
    for (size_t lo = first, hi = last_leaf + 1; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1) mark(lo++, end);
      if (hi & 1) mark(--hi, end);
    }
    refresh(first);
    refresh(last_leaf);
  }

 private:
  void mark(size_t v, uint64_t value) {
    max_[v] = std::max(max_[v], value);
    tag_[v] = std::max(tag_[v], value);
  }
  // The ancestors of leaf `v`: each one's maximum from its children and its own tag.
  void refresh(size_t v) {
    for (v >>= 1; v; v >>= 1) max_[v] = std::max({max_[2 * v], max_[2 * v + 1], tag_[v]});
  }
  size_t size_ = 1;
  std::vector<uint32_t> last_;  // by interval: the index of the last interval starting before its end
  std::vector<uint64_t> max_;   // by node: the maximum over its leaves
  std::vector<uint64_t> tag_;   // by node: a value raised over all of its leaves at once
};

}  // namespace

OfflinePlan plan_greedy_by_size(const std::vector<Event>& events, uint64_t align, uint64_t limit, uint64_t max_work) {
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
  // Few, wide leaves: merging many short runs cost more than filtering a longer list (bert:
  // 4096 leaves 2.9 s, 256 leaves 1.4 s, 16 leaves 1.1 s); about 2K allocations per leaf keeps
  // a query's scan bounded as traces grow.
  TimeTree tree(limit, std::clamp<uint64_t>(intervals.size() / 2048, 16, 1 << 16));
  std::unique_ptr<TopTree> above;  // set once the gap search has used its work bound
  for (size_t k = 0; k < order.size(); ++k) {
    const uint32_t id = order[k];
    const Interval& iv = intervals[id];
    if (!above && tree.work() > max_work) {
      above = std::make_unique<TopTree>(intervals);
      for (size_t j = 0; j < k; ++j) above->raise(order[j], offset[order[j]] + intervals[order[j]].size);
    }
    if (above) {
      offset[id] = above->top(id);
      above->raise(id, offset[id] + iv.size);
      ++plan.unsearched;
      plan.peak = std::max(plan.peak, offset[id] + iv.size);
      plan.offset_at[iv.start] = offset[id];
      plan.size_at[iv.start] = iv.size;
      continue;
    }
    // Best fit: the smallest gap between overlapping placed intervals that holds this one.
    uint64_t best = kUnplanned, best_gap = kUnplanned, top = 0;
    for (const auto& e : tree.overlapping(iv)) {
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
    tree.add(iv, offset[id]);
  }
  return plan;
}

namespace {

// splitmix64's finalizer: a well-mixed 64-bit hash step.
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// What a plan depends on: the kind, id and size of every planned event, the alignment, the limit.
uint64_t plan_key(const std::vector<Event>& events, uint64_t align, uint64_t limit) {
  uint64_t h = mix(mix(0, align), limit);
  for (uint64_t i = 0; i < limit; ++i) {
    const Event& e = events[i];
    if (e.kind != EventKind::Alloc && e.kind != EventKind::Free) continue;
    h = mix(h, (static_cast<uint64_t>(e.kind) << 32) | e.id);
    if (e.kind == EventKind::Alloc) h = mix(h, e.size);
  }
  return h;
}

}  // namespace

std::shared_ptr<const OfflinePlan> shared_plan_greedy_by_size(const std::vector<Event>& events, uint64_t align,
                                                              uint64_t limit) {
  struct Cached {
    uint64_t key;
    std::shared_ptr<const OfflinePlan> plan;
  };
  static std::mutex mutex;
  static std::vector<Cached> cache;  // most recently used last
  constexpr size_t kKept = 8;
  limit = std::min<uint64_t>(limit, events.size());
  const uint64_t key = plan_key(events, align, limit);
  {
    std::lock_guard lock(mutex);
    for (size_t i = 0; i < cache.size(); ++i)
      if (cache[i].key == key) {
        Cached hit = cache[i];
        cache.erase(cache.begin() + static_cast<ptrdiff_t>(i));
        cache.push_back(hit);
        return hit.plan;
      }
  }
  auto plan = std::make_shared<const OfflinePlan>(plan_greedy_by_size(events, align, limit));
  std::lock_guard lock(mutex);
  if (cache.size() == kKept) cache.erase(cache.begin());
  cache.push_back({key, plan});
  return plan;
}

}  // namespace fraglab::detail
