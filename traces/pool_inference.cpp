#include "traces/pool_inference.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_set>

#include "traces/format_error.h"

namespace fraglab {
namespace {

// An EmptyCache this pass inserted (rule 6's torch.cuda.graph() case) carries kInferredEmptyCache, so
// that a second pass can take it out again (pool_inference.h).
// Rounds of model-checked revision (rule 7): each is one replay of the trace.
constexpr int kMaxRevisions = 32;

PoolChecker& installed_checker() {
  static PoolChecker checker;
  return checker;
}

CollectorRunResolver& installed_resolver() {
  static CollectorRunResolver resolver;
  return resolver;
}

// The pool table: the default pools, then every private pool id the snapshot's segments name.
// (Linear: real snapshots name a handful of pools; infer_pools refuses more than a PoolIndex holds.)
PoolIndex intern_pool(TraceMeta& m, const std::array<int64_t, 2>& id) {
  for (size_t i = 0; i < m.pools.size(); ++i)
    if (m.pools[i].id == id) return static_cast<PoolIndex>(i);
  if (m.pools.size() > UINT16_MAX) throw std::length_error("more than 65,536 memory pools");
  m.pools.push_back(PoolInfo{id});
  return static_cast<PoolIndex>(m.pools.size() - 1);
}

// A pool no recording names, told apart by the model: id (-1, k).
PoolIndex new_inferred_pool(TraceMeta& m) {
  int64_t k = 0;
  for (const PoolInfo& p : m.pools) k += p.inferred();
  return intern_pool(m, {-1, k});
}

// Rule 2: the private pool that owns every segment seen on a stream, or 0.
std::vector<PoolIndex> pools_by_stream(TraceMeta& m) {
  constexpr PoolIndex kMixed = UINT16_MAX;
  std::vector<PoolIndex> by_stream(m.streams.size(), 0);
  std::vector<bool> seen(m.streams.size(), false);
  auto note = [&](const RecordedSegment& s) {
    PoolIndex p = intern_pool(m, s.pool_id);
    if (s.stream >= by_stream.size()) return;
    if (!seen[s.stream])
      by_stream[s.stream] = p, seen[s.stream] = true;
    else if (by_stream[s.stream] != p)
      by_stream[s.stream] = kMixed;
  };
  for (const RecordedSegment& s : m.initial.segments) note(s);
  for (const RecordedSegment& s : m.segments) note(s);
  for (PoolIndex& p : by_stream)
    if (p == kMixed) p = 0;
  return by_stream;
}

// By event index: a segment_alloc whose segment is never freed afterwards (still there at the end).
std::vector<bool> surviving_segment_allocs(const std::vector<Event>& events) {
  std::vector<bool> survives(events.size(), false);
  std::unordered_set<Addr> freed_later;
  for (size_t i = events.size(); i-- > 0;) {
    const Event& e = events[i];
    if (e.kind == EventKind::SegmentFree)
      freed_later.insert(e.addr);
    else if (e.kind == EventKind::SegmentAlloc)
      survives[i] = !freed_later.count(e.addr);
  }
  return survives;
}

// By initial segment (sorted by address, disjoint): whether the history frees or unmaps any of it.
std::vector<bool> initial_segments_released(const std::vector<RecordedSegment>& initial,
                                            const std::vector<Event>& events) {
  std::vector<bool> released(initial.size(), false);
  if (initial.empty()) return released;
  for (const Event& e : events) {
    if (e.kind != EventKind::SegmentFree && e.kind != EventKind::SegmentUnmap) continue;
    auto it = std::upper_bound(initial.begin(), initial.end(), e.addr,
                               [](Addr a, const RecordedSegment& s) { return a < s.address; });
    if (it != initial.begin()) --it;
    for (; it != initial.end() && it->address < e.addr + e.size; ++it)
      if (e.addr < it->address + it->total_size) released[static_cast<size_t>(it - initial.begin())] = true;
  }
  return released;
}

// Takes out what an earlier pass added, so that a pass starts from the importer's events.
void strip_inferred(std::vector<Event>& events) {
  std::erase_if(events, [](const Event& e) {
    return e.kind == EventKind::PoolRelease || (e.kind == EventKind::EmptyCache && e.id == kInferredEmptyCache);
  });
  for (Event& e : events) e.pool = 0;
}

// A segment (cudaMalloc) or mapped range, named across passes by where it began and how many
// segments began there before it.
struct InstanceKey {
  Addr addr;
  uint32_t occurrence;
  auto operator<=>(const InstanceKey&) const = default;
};
struct Instance {
  InstanceKey key;
  PoolIndex pool;
  bool certain;          // rule 1: the snapshot names its pool
  uint64_t created_at;   // its segment event's index
  bool initial = false;  // in the state at the first entry (its pool the reconstruction's guess unless certain)
};
using Overrides = std::map<InstanceKey, PoolIndex>;

// Live segments (for expandable segments: mapped ranges) by start address, with their instance.
class SegmentMap {
 public:
  struct Range {
    Addr end;
    uint32_t instance;
    StreamIndex stream;
  };
  void insert(Addr addr, uint64_t size, uint32_t instance, StreamIndex stream) {
    ranges_[addr] = Range{addr + size, instance, stream};
  }
  // Removes [addr, addr + size), trimming ranges it cuts; appends the instances it touched.
  void erase(Addr addr, uint64_t size, std::vector<uint32_t>& touched) {
    Addr end = addr + size;
    auto it = ranges_.upper_bound(addr);
    if (it != ranges_.begin()) --it;
    while (it != ranges_.end() && it->first < end) {
      Addr start = it->first;
      Range r = it->second;
      if (r.end <= addr) {
        ++it;
        continue;
      }
      touched.push_back(r.instance);
      it = ranges_.erase(it);
      if (start < addr) ranges_[start] = Range{addr, r.instance, r.stream};
      if (r.end > end) it = ranges_.emplace(end, Range{r.end, r.instance, r.stream}).first;
    }
  }
  const Range* containing(Addr addr) const {
    auto it = ranges_.upper_bound(addr);
    if (it == ranges_.begin()) return nullptr;
    --it;
    return addr < it->second.end ? &it->second : nullptr;
  }
  // Rule 3: a mapped range of `stream` that ends at `addr` or starts at `end`.
  const Range* adjoining(Addr addr, Addr end, StreamIndex stream) const {
    if (const Range* r = addr ? containing(addr - 1) : nullptr; r && r->end == addr && r->stream == stream) return r;
    auto it = ranges_.find(end);
    return it != ranges_.end() && it->second.stream == stream ? &it->second : nullptr;
  }

 private:
  std::map<Addr, Range> ranges_;
};

// One pass of rules 1 to 6 over the importer's events, with rule 7's revisions as overrides.
class PoolInference {
 public:
  PoolInference(Trace& trace, const Overrides& overrides)
      : trace_(trace),
        m_(trace.meta),
        overrides_(overrides),
        by_stream_(pools_by_stream(m_)),
        survives_(surviving_segment_allocs(trace.events)),
        last_private_(m_.streams.size(), 0) {
    const std::vector<bool> released = initial_segments_released(m_.initial.segments, trace.events);
    for (size_t i = 0; i < m_.initial.segments.size(); ++i) {
      RecordedSegment& s = m_.initial.segments[i];
      live_.insert(s.address, s.total_size, initial_instance(s, released[i]), s.stream);
    }
  }

  // The whole pass: sets pools and inserts PoolRelease / EmptyCache events.
  void run() {
    out_.reserve(trace_.events.size() + 4);
    walk(UINT64_MAX, UINT64_MAX);
    if (run_start_ != SIZE_MAX) end_release_run(Event{}, trace_.events.size());
    trace_.events = std::move(out_);
  }

  // Walks up to the Alloc event `alloc_ordinal` (not applied) and says which segment the recording
  // put it in, which segment holds `model_addr` then, and the private pool the stream last used.
  struct Situation {
    std::optional<Instance> recorded, model;
    bool recorded_is_new = false;  // made for this request (after the stream's previous request)
    PoolIndex last_private = 0;
  };
  Situation locate(uint64_t alloc_ordinal, Addr model_addr) {
    Situation s;
    uint64_t at = walk(alloc_ordinal, UINT64_MAX);
    if (at >= trace_.events.size()) return s;
    const Event& e = trace_.events[at];
    if (const SegmentMap::Range* r = live_.containing(e.addr)) {
      s.recorded = instances_[r->instance];
      s.recorded_is_new = s.recorded->created_at > last_request_at_;
    }
    if (const SegmentMap::Range* r = live_.containing(model_addr)) s.model = instances_[r->instance];
    s.last_private = e.stream < last_private_.size() ? last_private_[e.stream] : 0;
    return s;
  }
  // The segment at `addr` when the importer's EmptyCache `empty_cache_ordinal` happens.
  std::optional<Instance> segment_at_empty_cache(uint64_t empty_cache_ordinal, Addr addr) {
    if (walk(UINT64_MAX, empty_cache_ordinal) >= trace_.events.size()) return std::nullopt;
    const SegmentMap::Range* r = live_.containing(addr);
    return r ? std::optional<Instance>(instances_[r->instance]) : std::nullopt;
  }

 private:
  // Applies events until the Alloc numbered `stop_alloc` or the EmptyCache numbered `stop_empty_cache`
  // (not applied); returns its index (or the end).
  uint64_t walk(uint64_t stop_alloc, uint64_t stop_empty_cache) {
    uint64_t allocs = 0, empty_caches = 0;
    for (size_t i = 0; i < trace_.events.size(); ++i) {
      Event e = trace_.events[i];
      if (e.kind == EventKind::Alloc && allocs++ == stop_alloc) return i;
      if (e.kind == EventKind::EmptyCache && empty_caches++ == stop_empty_cache) return i;
      const bool release = e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentUnmap;
      if (!release && run_start_ != SIZE_MAX) end_release_run(e, i);
      switch (e.kind) {
        case EventKind::SegmentAlloc:
        case EventKind::SegmentMap: {
          auto [pool, certain] = new_segment_pool(e, i);
          live_.insert(e.addr, e.size, add_instance(e.addr, pool, certain, i), e.stream);
          break;
        }
        case EventKind::SegmentFree:
        case EventKind::SegmentUnmap:
          if (run_start_ == SIZE_MAX) run_start_ = out_.size();
          live_.erase(e.addr, e.size, run_instances_);
          break;
        case EventKind::Alloc: {
          const SegmentMap::Range* r = live_.containing(e.addr);
          e.pool = r ? instances_[r->instance].pool : stream_pool(e.stream);
          if (e.pool) released_.erase(e.pool);  // a new owner uses it
          if (e.stream < last_private_.size() && e.pool) last_private_[e.stream] = e.pool;
          last_request_at_ = i;
          break;
        }
        case EventKind::Oom:
          e.pool = stream_pool(e.stream);
          break;
        default:
          break;
      }
      out_.push_back(e);
    }
    return trace_.events.size();
  }

  // A segment of the state at the first entry. Its pool is certain where a final segment names it and
  // the history never released it; otherwise it is the reconstruction's guess (a neighbour's pool, or
  // the default pools), which rule 7 may revise like any other: the revised pool is written back to
  // the initial state, whose segments the model adopts in their pools.
  uint32_t initial_instance(RecordedSegment& s, bool released) {
    const bool certain = named_at_end(s) && !released;
    PoolIndex pool = intern_pool(m_, s.pool_id);
    if (!certain)
      if (auto it = overrides_.find(InstanceKey{s.address, occurrences_[s.address]}); it != overrides_.end()) {
        pool = it->second;
        s.pool_id = m_.pools[pool].id;
      }
    uint32_t k = add_instance(s.address, pool, certain, 0);
    instances_[k].initial = true;
    return k;
  }
  bool named_at_end(const RecordedSegment& s) const {
    return std::any_of(m_.segments.begin(), m_.segments.end(), [&](const RecordedSegment& f) {
      return f.is_expandable == s.is_expandable && s.address >= f.address && s.address < f.address + f.total_size;
    });
  }

  uint32_t add_instance(Addr addr, PoolIndex pool, bool certain, uint64_t at) {
    instances_.push_back(Instance{InstanceKey{addr, occurrences_[addr]++}, pool, certain, at});
    return static_cast<uint32_t>(instances_.size() - 1);
  }

  PoolIndex stream_pool(StreamIndex s) const { return s < by_stream_.size() ? by_stream_[s] : 0; }

  // Rules 1 to 4 for a new segment or mapping; true when rule 1 (the snapshot) says so.
  std::pair<PoolIndex, bool> segment_pool(const Event& e, size_t index) {
    if (e.kind == EventKind::SegmentAlloc && survives_[index]) {
      for (const RecordedSegment& s : m_.segments)
        if (s.address == e.addr && !s.is_expandable) return {intern_pool(m_, s.pool_id), true};
    }
    if (e.kind == EventKind::SegmentMap) {
      for (const RecordedSegment& s : m_.segments)  // the final mapped range it lies in
        if (s.is_expandable && e.addr >= s.address && e.addr < s.address + s.total_size)
          return {intern_pool(m_, s.pool_id), true};
      if (const SegmentMap::Range* r = live_.adjoining(e.addr, e.addr + e.size, e.stream))
        return {instances_[r->instance].pool, false};
    }
    return {stream_pool(e.stream), false};
  }

  // The pool of the segment `e` is about to make: the rules, or rule 7's revision of their guess.
  std::pair<PoolIndex, bool> new_segment_pool(const Event& e, size_t index) {
    auto guess = segment_pool(e, index);
    if (!guess.second)
      if (auto it = overrides_.find(InstanceKey{e.addr, occurrences_[e.addr]}); it != overrides_.end())
        guess.first = it->second;
    return guess;
  }

  // A run of segment releases ends at `next` (event `index`). The importer made it an empty_cache
  // unless a new segment followed (malloc's release-and-retry). But malloc releases only from the
  // request's own pool (release_available_cached_blocks), or from every pool when the request is the
  // default pools' (release_cached_blocks, skipped while a capture is underway): a run that released
  // another pool's segments before a private pool's new segment was torch.cuda.empty_cache() (as
  // torch.cuda.graph() calls it before capturing).
  void end_release_run(const Event& next, size_t index) {
    size_t at = run_start_;
    bool after_empty_cache = at > 0 && out_[at - 1].kind == EventKind::EmptyCache;
    if (!after_empty_cache && (next.kind == EventKind::SegmentAlloc || next.kind == EventKind::SegmentMap)) {
      PoolIndex pool = new_segment_pool(next, index).first;
      bool foreign = std::any_of(run_instances_.begin(), run_instances_.end(),
                                 [&](uint32_t k) { return instances_[k].pool != pool; });
      if (pool != 0 && foreign) {
        Event ec;
        ec.kind = EventKind::EmptyCache;
        ec.id = kInferredEmptyCache;
        ec.time_us = out_[at].time_us;
        out_.insert(out_.begin() + static_cast<std::ptrdiff_t>(at), ec);
        ++at;
        after_empty_cache = true;
      }
    }
    if (after_empty_cache)
      for (uint32_t k : run_instances_) release_before(instances_[k].pool, at - 1);
    run_start_ = SIZE_MAX;
    run_instances_.clear();
  }

  // Rule 6: PoolRelease before the EmptyCache at `at`, once per release of the pool.
  void release_before(PoolIndex pool, size_t at) {
    if (pool == 0 || !released_.insert(pool).second) return;
    Event r;
    r.kind = EventKind::PoolRelease;
    r.pool = pool;
    r.time_us = out_[at].time_us;
    out_.insert(out_.begin() + static_cast<std::ptrdiff_t>(at), r);
  }

  Trace& trace_;
  TraceMeta& m_;
  const Overrides& overrides_;
  std::vector<PoolIndex> by_stream_;
  std::vector<bool> survives_;
  std::vector<PoolIndex> last_private_;  // by stream: the private pool its latest request went to
  uint64_t last_request_at_ = 0;
  SegmentMap live_;
  std::vector<Instance> instances_;
  std::map<Addr, uint32_t> occurrences_;
  std::unordered_set<PoolIndex> released_;
  std::vector<Event> out_;
  size_t run_start_ = SIZE_MAX;          // where the current run of segment releases begins in out_
  std::vector<uint32_t> run_instances_;  // the segments it released
};

// The pool table only grows across passes (recorded ids are interned in the same order each time,
// inferred pools after them), so an override's pool index keeps its meaning.
void infer_once(Trace& trace, const Overrides& overrides) {
  strip_inferred(trace.events);
  PoolInference(trace, overrides).run();
}

// Rule 7: the revision a misplacement calls for, or nothing when no guess explains it.
std::optional<std::pair<InstanceKey, PoolIndex>> revision(Trace& trace, const Overrides& overrides,
                                                          std::set<std::pair<InstanceKey, PoolIndex>>& tried,
                                                          const PoolMisplacement& m) {
  Trace probe{trace.meta, trace.events};
  strip_inferred(probe.events);
  if (m.kind == PoolMisplacement::Kind::KeptSegment) {
    // The recording kept a segment the model returned: its pool was still owned.
    auto k = PoolInference(probe, overrides).segment_at_empty_cache(m.ordinal, m.model_addr);
    if (k && !k->certain && k->pool == 0) return std::pair{k->key, new_inferred_pool(trace.meta)};
    return std::nullopt;
  }
  auto s = PoolInference(probe, overrides).locate(m.ordinal, m.model_addr);
  auto untried = [&](const Instance& i, PoolIndex p) { return p != i.pool && !tried.count({i.key, p}); };
  // A segment of the state at the first entry, guessed to be the default pools', that the model reused:
  // its guess is the weakest (the range below it lent it), so it leaves for a pool of its own before the
  // request's own segment is moved.
  if (s.model && s.model->initial && !s.model->certain && s.model->pool == 0 &&
      (!s.recorded || s.model->key != s.recorded->key) && !tried.count({s.model->key, PoolIndex{0}}))
    return std::pair{s.model->key, new_inferred_pool(trace.meta)};
  // The request's new segment goes to the stream's last private pool, or to a pool of its own.
  if (s.recorded && !s.recorded->certain && s.recorded_is_new) {
    const Instance& r = *s.recorded;
    if (s.last_private && untried(r, s.last_private)) return std::pair{r.key, s.last_private};
    if (r.pool != 0 && untried(r, 0)) return std::pair{r.key, PoolIndex{0}};
    if (r.pool == 0) return std::pair{r.key, new_inferred_pool(trace.meta)};
  }
  // The segment the model reused leaves the request's pool.
  if (s.model && !s.model->certain && (!s.recorded || s.model->key != s.recorded->key)) {
    const Instance& t = *s.model;
    if (t.pool != 0 && untried(t, 0)) return std::pair{t.key, PoolIndex{0}};
    if (t.pool == 0) return std::pair{t.key, new_inferred_pool(trace.meta)};
  }
  return std::nullopt;
}

}  // namespace

void set_pool_checker(PoolChecker checker) { installed_checker() = std::move(checker); }
void set_collector_run_resolver(CollectorRunResolver resolver) { installed_resolver() = std::move(resolver); }

namespace {

void infer_pools_once(Trace& trace, PoolCheck when) {
  std::set<std::array<int64_t, 2>> ids;
  for (const auto* list : {&trace.meta.initial.segments, &trace.meta.segments})
    for (const RecordedSegment& s : *list) ids.insert(s.pool_id);
  if (ids.size() > UINT16_MAX)
    throw FormatError::in_file(trace.meta.source, fmt::format("the segments name {} memory pools; at most 65,535 "
                                                              "private pools are supported",
                                                              ids.size()));
  Overrides overrides;
  infer_once(trace, overrides);
  // No private pool: no inferred EmptyCache carries a pass mark, so the trace as it stands is
  // what the check's first round reads (pools_confirmed()).
  const bool defer = when == PoolCheck::Deferrable && trace.meta.pools.size() == 1;
  if (const PoolChecker& check = installed_checker(); check && !defer) {
    std::set<std::pair<InstanceKey, PoolIndex>> tried;
    for (int round = 0; round < kMaxRevisions; ++round) {
      std::optional<PoolMisplacement> misplaced;
      try {
        misplaced = check(trace);
      } catch (const std::exception&) {
        break;  // the model could not replay this history (inconsistent input): the rules' answer stands
      }
      if (!misplaced) break;
      std::optional<std::pair<InstanceKey, PoolIndex>> fix;
      try {
        fix = revision(trace, overrides, tried, *misplaced);
      } catch (const std::length_error&) {
        break;  // no room for another inferred pool
      }
      if (!fix) break;
      tried.insert(*fix);
      overrides[fix->first] = fix->second;
      infer_once(trace, overrides);
    }
  }
  for (Event& e : trace.events)  // the marks go: an EmptyCache is an EmptyCache
    if (e.kind == EventKind::EmptyCache) e.id = 0;
}

bool is_collector_mark(const Event& e) { return e.kind == EventKind::EmptyCache && e.id == kEmptyCacheOrCollector; }

}  // namespace

// Where the importer could not tell torch.cuda.empty_cache() from malloc's garbage collector, the pools
// are inferred for both readings (the model's checks differ: one empties the cache there, the other
// collects under a limit) and the resolver picks one.
void infer_pools(Trace& trace, PoolCheck when) {
  const CollectorRunResolver& resolve = installed_resolver();
  if (!resolve) std::erase_if(trace.events, is_collector_mark);  // no judge: malloc's reading, as before
  if (!resolve || std::none_of(trace.events.begin(), trace.events.end(), is_collector_mark)) {
    infer_pools_once(trace, when);
    return;
  }
  Trace collected = trace;
  std::erase_if(collected.events, is_collector_mark);
  infer_pools_once(trace, when);
  infer_pools_once(collected, when);
  bool take_collected = true;
  try {
    take_collected = resolve(trace, collected);
  } catch (const std::exception&) {
    // the model could not replay this history: malloc's reading, as with no judge installed
  }
  if (take_collected) trace = std::move(collected);
}

bool pool_check_pending(const Trace& trace) {
  return installed_checker() && trace.meta.format == "pytorch-snapshot" && !trace.meta.history_absent &&
         trace.meta.pools.size() == 1;
}

bool pools_confirmed(const Trace& trace) {
  const PoolChecker& check = installed_checker();
  if (!check) return true;
  try {
    return !check(trace);  // as infer_pools' first round: no misplacement, nothing to revise
  } catch (const std::exception&) {
    return true;  // the model could not replay it: the rules' answer stands, as there
  }
}

}  // namespace fraglab
