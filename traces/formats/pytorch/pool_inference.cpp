#include "traces/formats/pytorch/pool_inference.h"
#include "traces/formats/pytorch/settings_inference.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_set>

#include "traces/io/format_error.h"
#include "traces/populate_pages.h"

namespace fraglab {
namespace {

// An EmptyCache this pass inserted (rule 6's torch.cuda.graph() case) carries kInferredEmptyCache, so
// that a second pass can take it out again (pool_inference.h).
// Rounds of model-checked revision (rule 7): each is one replay of the trace.
constexpr int kMaxRevisions = 32;

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
  // The default stream (handle 0) is never a capture stream (capturing on it is an error): a pool that
  // owns its final segments is a MemPool used there beside the default pools, whose requests are the
  // default pools' unless the model says otherwise.
  for (size_t s = 0; s < by_stream.size() && s < m.streams.size(); ++s)
    if (m.streams[s] == 0) by_stream[s] = 0;
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

// A segment's memory given back: cudaFree of a segment or an unmap of an expandable range.
bool is_segment_release(const Event& e) {
  return e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentUnmap;
}

// By initial segment (sorted by address, disjoint): whether the history frees or unmaps any of it.
std::vector<bool> initial_segments_released(const std::vector<RecordedSegment>& initial,
                                            const std::vector<Event>& events) {
  std::vector<bool> released(initial.size(), false);
  if (initial.empty()) return released;
  for (const Event& e : events) {
    if (!is_segment_release(e)) continue;
    auto it = std::upper_bound(initial.begin(), initial.end(), e.addr,
                               [](Addr a, const RecordedSegment& s) { return a < s.address; });
    if (it != initial.begin()) --it;
    for (; it != initial.end() && it->address < e.addr + e.size; ++it)
      if (e.addr < it->address + it->total_size) released[static_cast<size_t>(it - initial.begin())] = true;
  }
  return released;
}

// Whether an earlier pass left `e` (`after_release`: the event before it releases a segment): a pool set, an
// inserted event, an EmptyCache moved after a run of releases.
bool left_by_a_pass(const Event& e, bool after_release) {
  return e.pool != 0 || e.kind == EventKind::PoolRelease ||
         (e.kind == EventKind::EmptyCache && (after_release || e.id == kInferredEmptyCache));
}

// Whether an earlier pass left anything in the events.
bool has_inferred(const std::vector<Event>& events) {
  bool after_release = false;
  for (const Event& e : events) {
    if (left_by_a_pass(e, after_release)) return true;
    after_release = is_segment_release(e);
  }
  return false;
}

// Takes out what an earlier pass added, so that a pass starts from the importer's events: the inserted
// events go, and an importer's EmptyCache that rule 6b moved after the releases of deleted MemPools goes
// back before the run (the importer never puts one right after a release).
// `known`: the events' survey, where the caller has one.
void strip_inferred(std::vector<Event>& events, const EventsSurvey* known = nullptr) {
  // A trace without private pools, as most are, has nothing to take out: one pass that only reads tells
  // (three that write every event cost 0.4 s on a 12M-entry snapshot).
  if (known ? !known->inferred : !has_inferred(events)) return;
  for (Event& e : events)
    if (e.kind == EventKind::PoolRelease && e.pool == 0 && e.id == kDroppedEmptyCache)
      e.kind = EventKind::EmptyCache, e.id = static_cast<AllocId>(e.addr), e.addr = 0;  // its mark kept in addr
  std::erase_if(events, [](const Event& e) {
    return e.kind == EventKind::PoolRelease || (e.kind == EventKind::EmptyCache && e.id == kInferredEmptyCache);
  });
  size_t run = SIZE_MAX;  // where the current run of releases began
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].pool = 0;
    if (is_segment_release(events[i])) {
      if (run == SIZE_MAX) run = i;
      continue;
    }
    if (events[i].kind == EventKind::EmptyCache && run != SIZE_MAX)
      std::rotate(events.begin() + static_cast<std::ptrdiff_t>(run), events.begin() + static_cast<std::ptrdiff_t>(i),
                  events.begin() + static_cast<std::ptrdiff_t>(i + 1));
    run = SIZE_MAX;
  }
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
  bool mapped = false;   // a mapped range of an expandable segment, which a MemPool with an allocator never has
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
    PopulatePages populate(out_.data(), out_.capacity() * sizeof(Event));  // faulted in on the other core
    walk(Stop{});
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
    uint64_t at = walk(Stop{EventKind::Alloc, alloc_ordinal});
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
  // The segment at `addr` when the `ordinal`-th event of kind `at` (EmptyCache: the importer's; Alloc;
  // Oom) happens, and the private pool its stream last used.
  struct Kept {
    std::optional<Instance> segment;
    PoolIndex last_private = 0;
  };
  Kept segment_at(EventKind at, uint64_t ordinal, Addr addr) {
    Kept k;
    uint64_t i = walk(Stop{at, ordinal});
    if (i >= trace_.events.size()) return k;
    if (const SegmentMap::Range* r = live_.containing(addr)) k.segment = instances_[r->instance];
    const StreamIndex stream = trace_.events[i].stream;
    k.last_private = stream < last_private_.size() ? last_private_[stream] : 0;
    return k;
  }

  // The segments the run of releases right after the `ordinal`-th importer's EmptyCache returned, in the
  // order the recording released them.
  std::vector<Instance> released_after(uint64_t ordinal) {
    std::vector<Instance> out;
    uint64_t i = walk(Stop{EventKind::EmptyCache, ordinal});
    std::vector<uint32_t> touched;
    for (++i; i < trace_.events.size() && is_segment_release(trace_.events[i]); ++i) {
      touched.clear();
      live_.erase(trace_.events[i].addr, trace_.events[i].size, touched);
      for (uint32_t k : touched) out.push_back(instances_[k]);
    }
    return out;
  }

  // Whether two live allocations of `pool` ever shared a segment (a mapped range), which a no_split
  // pool never lets happen: each request takes a whole block.
  bool allocations_share_segments(PoolIndex pool) {
    walk(Stop{});
    return pool < shared_.size() && shared_[pool];
  }

 private:
  struct Stop {
    EventKind kind = EventKind::Alloc;
    uint64_t ordinal = UINT64_MAX;  // none: to the end
  };
  // Applies events until the `stop.ordinal`-th event of kind `stop.kind` (not applied); returns its index
  // (or the end).
  uint64_t walk(Stop stop) {
    uint64_t seen = 0;
    for (size_t i = 0; i < trace_.events.size(); ++i) {
      Event e = trace_.events[i];
      if (e.kind == stop.kind && seen++ == stop.ordinal) return i;
      if (!is_segment_release(e) && run_start_ != SIZE_MAX) end_release_run(e, i);
      switch (e.kind) {
        case EventKind::SegmentAlloc:
        case EventKind::SegmentMap: {
          auto [pool, certain] = new_segment_pool(e, i);
          const uint32_t k = add_instance(e.addr, pool, certain, i);
          instances_[k].mapped = e.kind == EventKind::SegmentMap;
          live_.insert(e.addr, e.size, k, e.stream);
          break;
        }
        case EventKind::SegmentFree:
        case EventKind::SegmentUnmap: {
          if (run_start_ == SIZE_MAX) run_start_ = out_.size();
          const size_t touched = run_instances_.size();
          live_.erase(e.addr, e.size, run_instances_);
          run_pools_.push_back(run_instances_.size() > touched ? instances_[run_instances_[touched]].pool : 0);
          break;
        }
        case EventKind::Alloc: {
          const SegmentMap::Range* r = live_.containing(e.addr);
          e.pool = r ? instances_[r->instance].pool : stream_pool(e.stream);
          note_live(e, r ? r->instance : UINT32_MAX);
          if (e.pool) released_.erase(e.pool);  // a new owner uses it
          if (e.stream < last_private_.size() && e.pool) last_private_[e.stream] = e.pool;
          last_request_at_ = i;
          break;
        }
        case EventKind::Oom:
          e.pool = stream_pool(e.stream);
          break;
        case EventKind::Free:
          note_freed(e.id);
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
    if (expandable_at(0) && !s.is_expandable && !(certain && pool == 0)) {
      pool = own_allocator_pool(pool, s.stream);
      s.pool_id = m_.pools[pool].id;
    }
    uint32_t k = add_instance(s.address, pool, certain, 0);
    instances_[k].initial = true;
    instances_[k].mapped = s.is_expandable;
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

  // Live allocations by segment instance, for allocations_share_segments().
  void note_live(const Event& e, uint32_t instance) {
    if (e.id >= live_instance_.size()) live_instance_.resize(e.id + 1u, UINT32_MAX);
    live_instance_[e.id] = instance;
    if (instance == UINT32_MAX) return;
    if (instance >= live_in_.size()) live_in_.resize(instance + 1u, 0);
    if (++live_in_[instance] > 1) {
      const PoolIndex pool = instances_[instance].pool;
      if (pool >= shared_.size()) shared_.resize(pool + 1u, false);
      shared_[pool] = true;
    }
  }
  void note_freed(AllocId id) {
    if (id >= live_instance_.size() || live_instance_[id] == UINT32_MAX) return;
    --live_in_[live_instance_[id]];
    live_instance_[id] = UINT32_MAX;
  }

  // Under expandable segments a cudaMalloc-style segment (segment_alloc) is a MemPool's whose allocator
  // is its own (malloc turns expandable segments off for it): where the rules guessed the default pools,
  // it goes to the stream's last such pool, or to one inferred for it. The pool is marked either way.
  PoolIndex own_allocator_pool(PoolIndex guess, StreamIndex stream) {
    if (guess == 0) {
      const PoolIndex last = stream < last_private_.size() ? last_private_[stream] : 0;
      if (last && m_.pools[last].own_allocator) {
        guess = last;
      } else {
        auto it = std::find_if(m_.pools.begin(), m_.pools.end(),
                               [](const PoolInfo& p) { return p.inferred() && p.own_allocator; });
        guess = it != m_.pools.end() ? static_cast<PoolIndex>(it - m_.pools.begin()) : new_inferred_pool(m_);
      }
    }
    m_.pools[guess].own_allocator = true;
    return guess;
  }

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
    if (expandable_at(index) && e.kind == EventKind::SegmentAlloc && !(guess.second && guess.first == 0))
      guess.first = own_allocator_pool(guess.first, e.stream);
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
    if (after_empty_cache) {
      if (out_[at - 1].id != kInferredEmptyCache) at = mempools_deleted(at, next, index);
      for (uint32_t k : run_instances_) release_before(instances_[k].pool, at - 1);
    }
    run_start_ = SIZE_MAX;
    run_instances_.clear();
    run_pools_.clear();
  }

  // Rule 6b: a run after the importer's EmptyCache (out_[at - 1]) that begins with the segments of private
  // pools not yet released: each such leading chunk is a MemPool's destructor (releasePool, then
  // emptyCache of that pool alone: its small segments, then its large), before the program's empty_cache
  // (if any) returned the rest. A PoolRelease goes before each chunk, the pool is marked, and the
  // EmptyCache moves after the chunks. Where the chunks are the whole run, the program emptied nothing
  // (kDroppedEmptyCache: a default pool's cached segment would have gone too), unless malloc could have
  // made the run: an OOM follows (malloc's recovery), or a new segment for a request in one of those
  // pools under max_split_size (release_available_cached_blocks frees the request's own pool's oversize
  // blocks; a private pool's request never reaches release_cached_blocks, and a default one's frees only
  // pools already released). Returns where the EmptyCache is now.
  size_t mempools_deleted(size_t at, const Event& next, size_t next_index) {
    size_t k = 0;
    std::vector<std::pair<size_t, PoolIndex>> chunks;  // (offset in the run, pool)
    while (k < run_pools_.size() && run_pools_[k] != 0 && !released_.count(run_pools_[k])) {
      const PoolIndex pool = run_pools_[k];
      if (std::any_of(chunks.begin(), chunks.end(), [&](const auto& c) { return c.second == pool; })) break;
      chunks.emplace_back(k, pool);
      while (k < run_pools_.size() && run_pools_[k] == pool) ++k;
    }
    if (chunks.empty()) return at;
    Event empty_cache = out_[at - 1];
    out_.erase(out_.begin() + static_cast<std::ptrdiff_t>(at - 1));
    const size_t first = at - 1;  // the run's first release now
    for (size_t c = chunks.size(); c-- > 0;) {
      Event r;
      r.kind = EventKind::PoolRelease;
      r.pool = chunks[c].second;
      r.time_us = out_[first + chunks[c].first].time_us;
      out_.insert(out_.begin() + static_cast<std::ptrdiff_t>(first + chunks[c].first), r);
      m_.pools[r.pool].empties_on_release = true;
      released_.insert(r.pool);
    }
    const size_t after = first + k + chunks.size();
    bool mallocs = next.kind == EventKind::Oom;
    if ((next.kind == EventKind::SegmentAlloc || next.kind == EventKind::SegmentMap) && max_split_size_set_) {
      const PoolIndex pool = new_segment_pool(next, next_index).first;
      mallocs = std::any_of(chunks.begin(), chunks.end(), [&](const auto& c) { return c.second == pool; });
    }
    if (k == run_pools_.size() && !mallocs) {
      empty_cache.kind = EventKind::PoolRelease;
      empty_cache.addr = empty_cache.id;
      empty_cache.pool = 0;
      empty_cache.id = kDroppedEmptyCache;
    }
    out_.insert(out_.begin() + static_cast<std::ptrdiff_t>(after), empty_cache);
    return after + 1;
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
  const bool expandable_ = recorded_expandable(m_);
  // Where the program ran under the other setting (traces/formats/pytorch/settings_inference.h), by event index.
  const std::vector<std::pair<uint64_t, uint64_t>> flipped_ =
      flipped_event_ranges(trace_.events, m_.expandable_flipped);
  bool expandable_at(size_t index) const { return expandable_ != in_ranges(flipped_, index); }
  const bool max_split_size_set_ = [this] {
    auto it = m_.allocator_settings.find("max_split_size");
    return it == m_.allocator_settings.end() || (it->second != "-1" && it->second != std::to_string(SIZE_MAX));
  }();
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
  std::vector<PoolIndex> run_pools_;     // by release in the run: the pool of the segment it released
  std::vector<uint32_t> live_instance_;  // by allocation id: the instance it lies in (UINT32_MAX: none)
  std::vector<uint32_t> live_in_;        // by instance: live allocations in it
  std::vector<bool> shared_;             // by pool: two live allocations once shared a segment
};

// The pool table only grows across passes (recorded ids are interned in the same order each time,
// inferred pools after them), so an override's pool index keeps its meaning.
// A pass with nothing to infer: the segments name one pool (the default pools'), no revision overrides a guess,
// and no expandable segments (under which a cudaMalloc'd segment is a MemPool's own allocator's). Every
// segment is then the default pools', every request and OOM too (their pools are 0 once the earlier pass's are
// taken out), and no release run can be a private pool's: the walk over millions of events would copy them
// unchanged. The pool table is left as the walk leaves it (the segments' ids interned).
bool nothing_to_infer(Trace& trace, const Overrides& overrides) {
  pools_by_stream(trace.meta);
  return overrides.empty() && trace.meta.pools.size() == 1 && !recorded_expandable(trace.meta) &&
         trace.meta.expandable_flipped.empty();
}

// Whether the events changed (an earlier pass's inferences taken out, or this one's put in).
bool infer_once(Trace& trace, const Overrides& overrides, const EventsSurvey* known = nullptr) {
  const bool stripped = known ? known->inferred : true;
  strip_inferred(trace.events, known);
  for (PoolInfo& p : trace.meta.pools) p.empties_on_release = false;  // rule 6b sets it again
  if (nothing_to_infer(trace, overrides)) return stripped;
  PoolInference(trace, overrides).run();
  return true;
}

// Rule 7's revisions: a guessed segment moves to another pool, or a private pool is read as a
// MemPool(no_split=True).
struct Fix {
  std::optional<std::pair<InstanceKey, PoolIndex>> move;
  PoolIndex no_split = 0;
};
using Tried = std::set<std::pair<InstanceKey, PoolIndex>>;
// Which guess a misplaced request revises first: its own new segment (a capture's request made a
// segment the model would not: a graph's pool), or the segment the model reused (a MemPool's cached
// segment the model handed to a default request).
enum class Order { RequestFirst, ReusedFirst };

Fix move_to(const Instance& i, PoolIndex pool) { return Fix{std::pair{i.key, pool}, 0}; }

// Whether `pool` can hold the segment: a MemPool with an allocator of its own has no expandable ranges.
bool can_hold(const TraceMeta& m, const Instance& i, PoolIndex pool) {
  return !(i.mapped && m.pools[pool].own_allocator);
}

// A deleted MemPool's chunk (rule 6b) that begins with guessed default segments: ~MemPool's emptyCache of the
// pool returns its small segments, then its large ones, and nothing of the default pools; the recording
// released guessed default segments (a small one: no default request told its pool) right before a private
// pool's, and the model, reading the run as torch.cuda.empty_cache(), returned default segments the
// recording kept. The guessed segment nearest before the pool's first one in the run goes to that pool.
std::optional<Fix> chunk_revision(Trace& trace, const Trace& probe, const Overrides& overrides, const Tried& tried,
                                  uint64_t ordinal) {
  Trace walk{probe.meta, probe.events};
  const std::vector<Instance> run = PoolInference(walk, overrides).released_after(ordinal);
  auto first = std::find_if(run.begin(), run.end(), [](const Instance& i) { return i.pool != 0; });
  if (first == run.end()) return std::nullopt;
  for (auto q = first; q != run.begin();) {
    --q;
    if (q->pool != 0 || q->certain) break;
    if (!tried.count({q->key, first->pool}) && can_hold(trace.meta, *q, first->pool)) return move_to(*q, first->pool);
  }
  return std::nullopt;
}

// A kept segment: the model returned a guessed default segment the recording kept, so a pool still owned
// holds it. Malloc's own releases (the collector, release_cached_blocks before a retry or an OOM) name the
// pool the stream used last where there is one (a MemPool filled inside use_mem_pool, then cached);
// an empty_cache's a pool of its own, as before.
std::optional<Fix> kept_revision(Trace& trace, Trace& probe, const Overrides& overrides, const Tried& tried,
                                 const PoolMisplacement& m) {
  if (m.at == EventKind::EmptyCache)
    if (auto fix = chunk_revision(trace, probe, overrides, tried, m.ordinal)) return fix;
  auto k = PoolInference(probe, overrides).segment_at(m.at, m.ordinal, m.model_addr);
  if (!k.segment || k.segment->certain || k.segment->pool != 0) return std::nullopt;
  if (m.at != EventKind::EmptyCache && k.last_private && !tried.count({k.segment->key, k.last_private}) &&
      can_hold(trace.meta, *k.segment, k.last_private))
    return move_to(*k.segment, k.last_private);
  return move_to(*k.segment, new_inferred_pool(trace.meta));
}

// R1: the model cut the request from another segment of the request's own private pool where the
// recording did not, and no two of the pool's allocations ever shared a segment: the pool never splits.
std::optional<Fix> no_split_revision(const Trace& trace, const Overrides& overrides,
                                     const PoolInference::Situation& s) {
  if (!s.recorded || !s.model || s.recorded->pool == 0 || s.model->pool != s.recorded->pool ||
      s.model->key == s.recorded->key)
    return std::nullopt;
  const PoolIndex pool = s.recorded->pool;
  // A graph capture's own pool ((N, 0)) is no MemPool.
  if (trace.meta.pools[pool].no_split || trace.meta.pools[pool].id[0] > 0) return std::nullopt;
  Trace probe{trace.meta, trace.events};
  strip_inferred(probe.events);
  if (PoolInference(probe, overrides).allocations_share_segments(pool)) return std::nullopt;
  return Fix{std::nullopt, pool};
}

// Rule 7: the revision a misplacement calls for, or nothing when no guess explains it.
std::optional<Fix> revision(Trace& trace, const Overrides& overrides, const Tried& tried, const PoolMisplacement& m,
                            Order order) {
  Trace probe{trace.meta, trace.events};
  strip_inferred(probe.events);
  if (m.kind == PoolMisplacement::Kind::Unserved) return std::nullopt;  // nothing points at a guess
  if (m.kind == PoolMisplacement::Kind::KeptSegment) return kept_revision(trace, probe, overrides, tried, m);
  // A request the recording ran out of memory on, served by the model from a guessed segment's cached
  // block: that segment was not the request's pool's, as a segment malloc's recovery returned in the model
  // only was not (the same revision: the stream's last private pool, or a pool of its own).
  if (m.kind == PoolMisplacement::Kind::ServedOom) {
    PoolMisplacement at_oom = m;
    at_oom.at = EventKind::Oom;
    return kept_revision(trace, probe, overrides, tried, at_oom);
  }
  auto s = PoolInference(probe, overrides).locate(m.ordinal, m.model_addr);
  auto untried = [&](const Instance& i, PoolIndex p) {
    return p != i.pool && !tried.count({i.key, p}) && can_hold(trace.meta, i, p);
  };
  // A segment of the state at the first entry, guessed to be the default pools', that the model reused:
  // its guess is the weakest (the range below it lent it), so it leaves for a pool of its own before the
  // request's own segment is moved.
  if (s.model && s.model->initial && !s.model->certain && s.model->pool == 0 &&
      (!s.recorded || s.model->key != s.recorded->key) && !tried.count({s.model->key, PoolIndex{0}}))
    return move_to(*s.model, new_inferred_pool(trace.meta));
  if (auto fix = no_split_revision(trace, overrides, s)) return fix;
  // The request's new segment goes to the stream's last private pool, or to a pool of its own.
  auto request_segment = [&]() -> std::optional<Fix> {
    if (!s.recorded || s.recorded->certain || !s.recorded_is_new) return std::nullopt;
    const Instance& r = *s.recorded;
    if (s.last_private && untried(r, s.last_private)) return move_to(r, s.last_private);
    if (r.pool != 0 && untried(r, 0)) return move_to(r, 0);
    if (r.pool == 0) return move_to(r, new_inferred_pool(trace.meta));
    return std::nullopt;
  };
  // The segment the model reused leaves the request's pool (read the other way first: for the stream's
  // last private pool, where the model gave a default request a MemPool's cached segment).
  auto reused_segment = [&]() -> std::optional<Fix> {
    if (!s.model || s.model->certain || (s.recorded && s.model->key == s.recorded->key)) return std::nullopt;
    const Instance& t = *s.model;
    if (t.pool != 0 && untried(t, 0)) return move_to(t, 0);
    if (t.pool == 0 && order == Order::ReusedFirst && s.last_private && untried(t, s.last_private))
      return move_to(t, s.last_private);
    if (t.pool == 0) return move_to(t, new_inferred_pool(trace.meta));
    return std::nullopt;
  };
  auto first = order == Order::RequestFirst ? request_segment() : reused_segment();
  if (first) return first;
  if (auto second = order == Order::RequestFirst ? reused_segment() : request_segment()) return second;
  // R2: the recording put the request in a guessed segment it had before, the model elsewhere: that
  // segment is another pool's (the stream's last private pool, or one of its own): a no_split MemPool's
  // whole cached block, say, which the model passed over for a default remainder.
  if (s.recorded && !s.recorded->certain && !s.recorded_is_new) {
    const Instance& r = *s.recorded;
    if (s.last_private && untried(r, s.last_private)) return move_to(r, s.last_private);
    if (r.pool == 0 && !s.last_private) return move_to(r, new_inferred_pool(trace.meta));
  }
  return std::nullopt;
}

}  // namespace

EventsSurvey survey_events(const std::vector<Event>& events) {
  EventsSurvey s;
  bool after_release = false;
  for (const Event& e : events) {
    if (e.kind == EventKind::EmptyCache) {
      s.marks = true;
      s.collector_marks = s.collector_marks || e.id == kEmptyCacheOrCollector;
    } else if (e.kind == EventKind::PoolRelease) {
      s.marks = s.marks || e.pool == 0;
    }
    s.inferred = s.inferred || left_by_a_pass(e, after_release);
    after_release = is_segment_release(e);
  }
  return s;
}

EventsSurvey survey_empty_caches(const std::vector<Event>& events, const std::vector<size_t>& empty_caches) {
  EventsSurvey s;
  for (size_t at : empty_caches) {
    const Event& e = events.at(at);
    s.marks = true;
    s.collector_marks = s.collector_marks || e.id == kEmptyCacheOrCollector;
    s.inferred = s.inferred || left_by_a_pass(e, at > 0 && is_segment_release(events[at - 1]));
  }
  return s;
}

namespace {

// A block the model put elsewhere under expandable segments may show another GPU than the one assumed rather
// than another pool (a larger GPU's ranges leave more unmapped space after a segment's last block, which
// get_free_block weighs): each GPU the model offers is tried, and kept where the model then agrees, or first
// misplaces a block later. `misplaced` becomes what the model then shows.
void try_other_gpus(Trace& trace, const SnapshotModel& model, std::optional<PoolMisplacement>& misplaced) {
  if (!model.other_gpu_totals || misplaced->kind != PoolMisplacement::Kind::Block) return;
  for (uint64_t total : model.other_gpu_totals(trace)) {
    const uint64_t assumed = trace.meta.gpu_total_memory;
    trace.meta.gpu_total_memory = total;
    std::optional<PoolMisplacement> shown;
    try {
      shown = model.find_misplacement(trace);
    } catch (const std::exception&) {
      shown = misplaced;  // not replayable so: as before
    }
    if (!shown || (shown->kind == PoolMisplacement::Kind::Block && shown->ordinal > misplaced->ordinal)) {
      misplaced = shown;
      return;
    }
    trace.meta.gpu_total_memory = assumed;
  }
}

// Rule 7's rounds from the rules' reading, revising guesses in the given order; true when the model agrees
// at the end (or cannot replay the history, where the rules' answer stands).
bool revise(Trace& trace, const SnapshotModel& model, Overrides& overrides, Order order) {
  const PoolChecker& check = model.find_misplacement;
  Tried tried;
  for (int round = 0; round <= kMaxRevisions; ++round) {
    std::optional<PoolMisplacement> misplaced;
    try {
      misplaced = check(trace);
    } catch (const std::exception&) {
      return true;  // the model could not replay this history (inconsistent input): the rules' answer stands
    }
    if (misplaced && round == 0) try_other_gpus(trace, model, misplaced);
    if (!misplaced) return true;
    if (round == kMaxRevisions) return false;
    std::optional<Fix> fix;
    try {
      fix = revision(trace, overrides, tried, *misplaced, order);
    } catch (const std::length_error&) {
      return false;  // no room for another inferred pool
    }
    if (!fix) return false;
    if (fix->move) {
      tried.insert(*fix->move);
      overrides[fix->move->first] = fix->move->second;
    }
    if (fix->no_split) trace.meta.pools[fix->no_split].no_split = true;
    infer_once(trace, overrides);
  }
  return false;
}

// The model's fallbacks (FallbackReading), read as default-pool requests; false where it found none.
bool read_fallbacks(Trace& trace, const SnapshotModel& model) {
  const FallbackReader& reader = model.find_fallbacks;
  if (!reader || trace.meta.pools.size() == 1) return false;
  std::optional<FallbackReading> r;
  try {
    r = reader(trace);
  } catch (const std::exception&) {
    return false;  // the model could not replay this history: the requests stay the pools'
  }
  if (!r || r->allocs.empty()) return false;
  for (PoolIndex p : r->pools) trace.meta.pools[p].use_on_oom = true;
  uint64_t allocs = 0;
  size_t next = 0;
  for (Event& e : trace.events) {
    if (e.kind != EventKind::Alloc) continue;
    if (next < r->allocs.size() && r->allocs[next] == allocs) {
      e.pool = 0;
      ++next;
    }
    ++allocs;
  }
  return true;
}

// A limit the history may show (a recorded OOM, or the collector's releases): only under one can
// malloc have fallen back on a use_on_oom pool that the fallback reader would find.
bool may_show_a_limit(const Trace& trace) {
  auto gc = trace.meta.allocator_settings.find("garbage_collection_threshold");
  if (gc == trace.meta.allocator_settings.end() || std::strtod(gc->second.c_str(), nullptr) != 0.0) return true;
  return std::any_of(trace.events.begin(), trace.events.end(), [](const Event& e) { return e.kind == EventKind::Oom; });
}

// What revising in an order leaves: the reading, its overrides, whether the model agrees.
struct Reading {
  std::vector<PoolInfo> pools;
  InitialState initial;
  Overrides overrides;
  bool agrees = false;
};

Reading revised(Trace& trace, const SnapshotModel& model, const std::vector<PoolInfo>& pools,
                const InitialState& initial, Order order) {
  Reading r{pools, initial, {}, false};
  trace.meta.pools = pools;
  trace.meta.initial = initial;
  infer_once(trace, r.overrides);
  r.agrees = revise(trace, model, r.overrides, order);
  r.pools = trace.meta.pools;
  r.initial = trace.meta.initial;
  return r;
}

void adopt(Trace& trace, const Reading& r) {
  trace.meta.pools = r.pools;
  trace.meta.initial = r.initial;
  infer_once(trace, r.overrides);
}

// Rule 7 in the usual order (a misplaced request's own new segment revised first: a capture's pool);
// where it ends without agreement, or where a limit may show and the other order (the segment the model
// reused revised first: a MemPool's cached segment handed to a default request) reads requests as
// fallbacks on a use_on_oom pool, the other order's reading is taken. The first stands where neither
// agrees.
void revise_both_ways(Trace& trace, const SnapshotModel& model) {
  const std::vector<PoolInfo> pools = trace.meta.pools;
  const InitialState initial = trace.meta.initial;
  Reading first{pools, initial, {}, false};
  first.agrees = revise(trace, model, first.overrides, Order::RequestFirst);
  first.pools = trace.meta.pools;
  first.initial = trace.meta.initial;
  if (first.agrees && !(model.find_fallbacks && trace.meta.pools.size() > 1 && may_show_a_limit(trace))) return;
  if (first.agrees && read_fallbacks(trace, model)) return;
  Reading other = revised(trace, model, pools, initial, Order::ReusedFirst);
  if (other.agrees && read_fallbacks(trace, model)) return;
  if (other.agrees && !first.agrees) return;
  adopt(trace, first);
}

void infer_pools_once(Trace& trace, const SnapshotModel& model, PoolCheck when, const EventsSurvey* known = nullptr) {
  std::set<std::array<int64_t, 2>> ids;
  for (const auto* list : {&trace.meta.initial.segments, &trace.meta.segments})
    for (const RecordedSegment& s : *list) ids.insert(s.pool_id);
  if (ids.size() > UINT16_MAX)
    throw FormatError::in_file(trace.meta.source, fmt::format("the segments name {} memory pools; at most 65,535 "
                                                              "private pools are supported",
                                                              ids.size()));
  Overrides overrides;
  bool changed = infer_once(trace, overrides, known);
  // No private pool: no inferred EmptyCache carries a pass mark, so the trace as it stands is
  // what the check's first round reads (pools_confirmed()).
  const bool defer = when == PoolCheck::Deferrable && trace.meta.pools.size() == 1;
  if (model.find_misplacement && !defer) revise_both_ways(trace, model), changed = true;
  if (known && !changed && !known->marks) return;  // the events as surveyed: no mark to clear
  bool dropped_marks = false;    // rule 6b's stand-ins for the importer's EmptyCache (PoolRelease of pool 0)
  for (Event& e : trace.events)  // the marks go: an EmptyCache is an EmptyCache
    if (e.kind == EventKind::EmptyCache)
      e.id = 0;
    else if (e.kind == EventKind::PoolRelease && e.pool == 0)
      dropped_marks = true;
  if (dropped_marks)  // else a second pass over millions of events finds nothing
    std::erase_if(trace.events, [](const Event& e) { return e.kind == EventKind::PoolRelease && e.pool == 0; });
}

bool is_collector_mark(const Event& e) { return e.kind == EventKind::EmptyCache && e.id == kEmptyCacheOrCollector; }

// Rounds of the run-by-run reading of collector marks: each is one inference and one replay, at most 8
// and at most about 6M events replayed over all (a long history gets fewer).
constexpr uint64_t kMixRounds = 8;
constexpr uint64_t kMixBudget = 6'000'000;

// The trace read with the marks `kept` (by mark, in order) as the program's empty_cache() and the others
// as malloc's releases, its pools inferred.
Trace read_marks(const Trace& marked, const SnapshotModel& model, const std::vector<bool>& kept, PoolCheck when) {
  Trace t = marked;
  size_t k = 0;
  std::erase_if(t.events, [&](const Event& e) { return is_collector_mark(e) && !kept[k++]; });
  infer_pools_once(t, model, when);
  return t;
}

// How many requests come before event `index` (stable across readings: inference moves no Alloc).
uint64_t allocs_before(const std::vector<Event>& events, uint64_t index) {
  const auto end = events.begin() + static_cast<std::ptrdiff_t>(std::min<uint64_t>(index, events.size()));
  return static_cast<uint64_t>(
      std::count_if(events.begin(), end, [](const Event& e) { return e.kind == EventKind::Alloc; }));
}

// Neither reading of every mark replayed exactly: from the one taken (`read`, diverging where `reading`
// says), a mark right before the model's first disagreement (no request between them: the run it stands
// for is what the model disagreed with) is read the other way, kept while the disagreement moves later.
// The exact reading found, with what its replay learns of the limit (TraceMeta::gpu_limit, as the resolver
// notes it for the collector's reading), or nothing. Where the disagreement lies elsewhere (other settings
// tried by a search, say) nothing is replayed.
std::optional<Trace> read_runs_one_by_one(const Trace& marked, const Trace& read, const CollectorRunReading& reading,
                                          const SnapshotModel& model, PoolCheck when) {
  std::vector<uint64_t> mark_allocs;  // requests before each mark
  uint64_t allocs = 0;
  for (const Event& e : marked.events) {
    if (is_collector_mark(e)) mark_allocs.push_back(allocs);
    if (e.kind == EventKind::Alloc) ++allocs;
  }
  if (mark_allocs.size() < 2) return std::nullopt;  // one mark: the two readings were all there is
  const uint64_t rounds = std::min(kMixRounds, kMixBudget / std::max<uint64_t>(marked.events.size(), 1));
  std::vector<bool> kept(mark_allocs.size(), !reading.collected), turned(mark_allocs.size(), false);
  std::optional<Trace> best;
  std::optional<uint64_t> diverged = reading.diverged_at;
  for (uint64_t round = 0; round < rounds && diverged; ++round) {
    const uint64_t at = allocs_before(best ? best->events : read.events, *diverged);
    auto m = std::find(mark_allocs.begin(), mark_allocs.end(), at);
    while (m != mark_allocs.end() && *m == at && turned[m - mark_allocs.begin()]) ++m;
    if (m == mark_allocs.end() || *m != at) return std::nullopt;
    const size_t k = static_cast<size_t>(m - mark_allocs.begin());
    kept[k] = !kept[k];
    turned[k] = true;
    Trace next = read_marks(marked, model, kept, when);
    const std::optional<uint64_t> next_diverged = first_divergence_or_start(next, model);
    if (next_diverged && allocs_before(next.events, *next_diverged) <= at) return std::nullopt;
    best = std::move(next);
    diverged = next_diverged;
  }
  if (diverged) return std::nullopt;
  Trace again = *best;
  try {
    model.resolve_collector_runs(*best, again);
    best->meta.gpu_limit = again.meta.gpu_limit;
  } catch (const std::exception&) {
    // it replayed exactly a moment ago: the meta stays as read
  }
  return best;
}

// Both readings of the marked runs, each with its pools inferred, judged by the model's resolver: `taken`
// becomes the reading it took (the collector's where it could not replay the history). Nothing where it could not.
std::optional<CollectorRunReading> read_both_ways(const Trace& marked, const SnapshotModel& model, PoolCheck when,
                                                  Trace& taken) {
  Trace emptied = marked, collected = marked;
  std::erase_if(collected.events, is_collector_mark);
  infer_pools_once(emptied, model, when);
  infer_pools_once(collected, model, when);
  std::optional<CollectorRunReading> reading;
  try {
    reading = model.resolve_collector_runs(emptied, collected);
  } catch (const std::exception&) {
    // the model could not replay this history
  }
  taken = !reading || reading->collected ? std::move(collected) : std::move(emptied);
  return reading;
}

// The marked runs read with the pools as the rules read them (`by_rules`: the model without rule 7): both
// readings replayed, then, where neither is exact, the runs one by one. Under a wrong reading of a run the
// model puts blocks elsewhere than the recording, which rule 7 would explain with pools the program never
// made (a random workload under a fraction, the collector on and empty_cache() at a few steps, read with 18
// invented pools): the runs are settled first, and the pools inferred on the reading that replays exactly.
// Nothing where no reading replays exactly so (a program whose private pools the rules do not find).
std::optional<Trace> runs_read_by_rules(const Trace& marked, const SnapshotModel& by_rules, PoolCheck when) {
  Trace taken;
  const std::optional<CollectorRunReading> reading = read_both_ways(marked, by_rules, when, taken);
  if (!reading) return std::nullopt;  // not replayable so: the usual reading
  if (reading->exact) return taken;
  if (when == PoolCheck::Deferrable) return std::nullopt;  // the checked import reads the runs one by one
  return read_runs_one_by_one(marked, taken, *reading, by_rules, when);
}

// Both readings of the marked runs, each with its pools inferred, judged by the model's resolver; where
// neither replays exactly, the runs one by one. False where the reading taken is known not to replay
// exactly (true also where a deferred check is left to judge it).
bool read_marked_runs(Trace& trace, const Trace& marked, const SnapshotModel& model, PoolCheck when, RunReading runs) {
  // Where the model could not replay this history: malloc's reading, as with no judge.
  const CollectorRunReading reading =
      read_both_ways(marked, model, when, trace).value_or(CollectorRunReading{true, true, std::nullopt});
  // A deferred check reads as the rules do: the reading run by run is the checked import's, which the
  // disagreement left sends to (pools_confirmed).
  if (reading.exact || (when == PoolCheck::Deferrable && trace.meta.pools.size() == 1)) return true;
  if (runs == RunReading::AsTaken) return false;
  std::optional<Trace> mixed = read_runs_one_by_one(marked, trace, reading, model, when);
  if (!mixed) return false;
  trace = std::move(*mixed);
  return true;
}

}  // namespace

// Where the importer could not tell torch.cuda.empty_cache() from malloc's garbage collector, the pools
// are inferred for both readings (the model's checks differ: one empties the cache there, the other
// collects under a limit) and the resolver picks one.
void infer_pools(Trace& trace, const SnapshotModel& model, PoolCheck when, RunReading runs, const EventsSurvey* told) {
  const CollectorRunResolver& resolve = model.resolve_collector_runs;
  const EventsSurvey known = told ? *told : survey_events(trace.events);
  if (!resolve && known.collector_marks) {  // no judge: malloc's reading, as before
    std::erase_if(trace.events, is_collector_mark);
    infer_pools_once(trace, model, when);  // the survey no longer holds
    return;
  }
  if (!known.collector_marks) {
    infer_pools_once(trace, model, when, &known);
    return;
  }
  const Trace marked = trace;
  if (read_marked_runs(trace, marked, model, when, runs) || runs == RunReading::AsTaken || !model.find_misplacement ||
      !model.find_divergence)
    return;
  // Neither reading, nor the runs read one by one, replayed exactly: the runs settled again with the rules'
  // pools (runs_read_by_rules), taken where, its pools then inferred, the model replays it exactly.
  SnapshotModel by_rules = model;
  by_rules.find_misplacement = nullptr;
  std::optional<Trace> settled = runs_read_by_rules(marked, by_rules, when);
  if (!settled) return;
  infer_pools_once(*settled, model, when);
  if (!first_divergence_or_start(*settled, model)) trace = std::move(*settled);
}

bool pool_check_pending(const Trace& trace, const SnapshotModel& model) {
  return model.find_misplacement && trace.meta.format == "pytorch-snapshot" && !trace.meta.history_absent &&
         trace.meta.pools.size() == 1;
}

bool pools_confirmed(const Trace& trace, const SnapshotModel& model) {
  const PoolChecker& check = model.find_misplacement;
  if (!check) return true;
  try {
    return !check(trace);  // as infer_pools' first round: no misplacement, nothing to revise
  } catch (const std::exception&) {
    return true;  // the model could not replay it: the rules' answer stands, as there
  }
}

}  // namespace fraglab
