#include "traces/formats/pytorch/skipped_actions.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <set>
#include <unordered_set>

#include "traces/units.h"

namespace fraglab {

namespace {

using Counts = std::array<uint64_t, 16>;

uint64_t count(const Counts& c, EventKind k) { return c[static_cast<size_t>(k)]; }

bool is_release(EventKind k) { return k == EventKind::SegmentFree || k == EventKind::SegmentUnmap; }
bool is_make(EventKind k) { return k == EventKind::SegmentAlloc || k == EventKind::SegmentMap; }

// Ranges [base, base + size) by base, as an interval set (they do not overlap).
class Ranges {
 public:
  // The range holding `a`, or end().
  std::map<Addr, uint64_t>::const_iterator holding(Addr a) const {
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) return ranges_.end();
    --it;
    return a < it->first + it->second ? it : ranges_.end();
  }
  bool overlaps(Addr base, uint64_t size) const {
    auto it = ranges_.lower_bound(base);
    if (it != ranges_.end() && it->first < base + size) return true;
    return it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second > base;
  }
  // The ranges overlapping [base, base + size), removed and returned.
  std::vector<std::pair<Addr, uint64_t>> take_overlapping(Addr base, uint64_t size) {
    std::vector<std::pair<Addr, uint64_t>> out;
    auto it = ranges_.lower_bound(base);
    if (it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second > base) --it;
    while (it != ranges_.end() && it->first < base + size) {
      out.emplace_back(*it);
      it = ranges_.erase(it);
    }
    return out;
  }
  void add(Addr base, uint64_t size) { ranges_[base] = size; }
  void erase_within(Addr base, uint64_t size) { take_overlapping(base, size); }
  bool contains(Addr a) const { return holding(a) != ranges_.end(); }
  auto end() const { return ranges_.end(); }
  const std::map<Addr, uint64_t>& all() const { return ranges_; }

 private:
  std::map<Addr, uint64_t> ranges_;
};

// An allocation inside a range the history released (segment_free / segment_unmap) and never made again: the
// call that made it again was skipped (a history begun mid-run never shows this).
bool allocates_in_released(const std::vector<Event>& history) {
  Ranges released;
  for (const Event& e : history) {
    if (is_release(e.kind)) released.add(e.addr, e.size);
    if (is_make(e.kind)) released.erase_within(e.addr, e.size);
    if (e.kind == EventKind::Alloc && released.contains(e.addr)) return true;
  }
  return false;
}

// A segment or range made over one the history made and never released, or made and absent at the end: the
// release was skipped.
bool makes_over_unreleased(const std::vector<Event>& history, const std::vector<RecordedSegment>& final_segments,
                           const HistoryIndex* index) {
  Ranges made, at_end;
  for (const RecordedSegment& s : final_segments) at_end.add(s.address, s.total_size);
  bool over = false;
  for_each_other_entry(history, index, [&](size_t i) {
    const Event& e = history[i];
    if (over) return;
    if (is_release(e.kind)) made.erase_within(e.addr, e.size);
    if (!is_make(e.kind)) return;
    if (made.overlaps(e.addr, e.size)) over = true;
    made.add(e.addr, e.size);
  });
  if (over) return true;
  for (const auto& [base, size] : made.all())
    if (!at_end.contains(base)) return true;
  return false;
}

Event inferred(EventKind kind, Addr addr, uint64_t size, const Event& beside) {
  Event e;
  e.kind = kind;
  e.addr = addr;
  e.size = size;
  e.stream = beside.stream;
  e.time_us = beside.time_us;
  return e;
}

// segment_alloc skipped (segments made by cudaMalloc; their sizes are known from their segment_free entries and
// the final segments): each made just before the first allocation in it, unless a block in it was live first.
size_t infer_segment_allocs(std::vector<Event>& history, EntryOffsets& offsets,
                            const std::vector<RecordedSegment>& final_segments) {
  std::map<Addr, std::deque<uint64_t>> sizes;  // base -> the sizes of its successive segments
  for (const Event& e : history)
    if (e.kind == EventKind::SegmentFree) sizes[e.addr].push_back(e.size);
  for (const RecordedSegment& s : final_segments)
    if (!s.is_expandable) sizes[s.address].push_back(s.total_size);
  // The next segment at a base whose extent holds `a`.
  auto extent_of = [&](Addr a) -> std::pair<Addr, uint64_t> {
    auto it = sizes.upper_bound(a);
    while (it != sizes.begin()) {
      --it;
      if (!it->second.empty() && a < it->first + it->second.front()) return {it->first, it->second.front()};
      if (!it->second.empty()) break;  // the nearest segment below ends before `a`
    }
    return {0, 0};
  };
  Ranges live;
  std::vector<Event> out;
  EntryOffsets out_offsets;
  out.reserve(history.size());
  out_offsets.reserve(history.size());
  size_t made = 0;
  for (size_t i = 0; i < history.size(); ++i) {
    const Event& e = history[i];
    const bool touches_block =
        e.kind == EventKind::Alloc || e.kind == EventKind::Free || e.kind == EventKind::FreeRequested;
    if (touches_block && !live.contains(e.addr)) {
      auto [base, size] = extent_of(e.addr);
      if (size) {
        live.add(base, size);
        if (e.kind == EventKind::Alloc) {  // made for this request; a block freed first was there before
          out.push_back(inferred(EventKind::SegmentAlloc, base, size, e));
          out_offsets.push_back(offsets[i]);
          ++made;
        }
      }
    }
    if (e.kind == EventKind::SegmentFree) {
      live.erase_within(e.addr, e.size);
      if (auto it = sizes.find(e.addr); it != sizes.end() && !it->second.empty()) it->second.pop_front();
    }
    out.push_back(e);
    out_offsets.push_back(offsets[i]);
  }
  history = std::move(out);
  offsets = std::move(out_offsets);
  return made;
}

// segment_free / segment_unmap skipped: a range made over one still made is released just before; ranges made
// in the history and absent at the end are released at the end.
size_t infer_releases(std::vector<Event>& history, EntryOffsets& offsets,
                      const std::vector<RecordedSegment>& final_segments, EventKind make, EventKind release) {
  Ranges made, at_end;
  for (const RecordedSegment& s : final_segments) at_end.add(s.address, s.total_size);
  std::vector<Event> out;
  EntryOffsets out_offsets;
  out.reserve(history.size());
  out_offsets.reserve(history.size());
  size_t released = 0;
  for (size_t i = 0; i < history.size(); ++i) {
    const Event& e = history[i];
    if (e.kind == make) {
      for (const auto& [base, size] : made.take_overlapping(e.addr, e.size)) {
        out.push_back(inferred(release, base, size, e));
        out_offsets.push_back(offsets[i]);
        ++released;
      }
      made.add(e.addr, e.size);
    }
    out.push_back(e);
    out_offsets.push_back(offsets[i]);
  }
  if (!history.empty())
    for (const auto& [base, size] : made.all())
      if (!at_end.contains(base)) {
        out.push_back(inferred(release, base, size, history.back()));
        out_offsets.push_back(offsets.back());
        ++released;
      }
  history = std::move(out);
  offsets = std::move(out_offsets);
  return released;
}

// free_requested and free_completed both skipped: a block is freed just before its address is allocated again.
size_t infer_frees(std::vector<Event>& history, EntryOffsets& offsets) {
  std::unordered_set<Addr> live;
  std::vector<Event> out;
  EntryOffsets out_offsets;
  size_t freed = 0;
  for (size_t i = 0; i < history.size(); ++i) {
    const Event& e = history[i];
    if (e.kind == EventKind::Alloc && !live.insert(e.addr).second) {
      out.push_back(inferred(EventKind::Free, e.addr, 0, e));
      out_offsets.push_back(offsets[i]);
      ++freed;
    }
    out.push_back(e);
    out_offsets.push_back(offsets[i]);
  }
  history = std::move(out);
  offsets = std::move(out_offsets);
  return freed;
}

// The most reserved bytes the device calls reach, from what the final segments imply at the first entry.
uint64_t peak_of_device_calls(const std::vector<Event>& history, const std::vector<RecordedSegment>& final_segments) {
  int64_t net = 0, reserved_at_end = 0;
  for (const RecordedSegment& s : final_segments) reserved_at_end += static_cast<int64_t>(s.total_size);
  for (const Event& e : history)
    net += is_make(e.kind) ? static_cast<int64_t>(e.size) : is_release(e.kind) ? -static_cast<int64_t>(e.size) : 0;
  int64_t reserved = std::max<int64_t>(0, reserved_at_end - net), peak = reserved;
  for (const Event& e : history) {
    reserved += is_make(e.kind) ? static_cast<int64_t>(e.size) : is_release(e.kind) ? -static_cast<int64_t>(e.size) : 0;
    peak = std::max(peak, reserved);
  }
  return static_cast<uint64_t>(peak);
}

// No alloc entries, and an address freed twice: only a new allocation between can explain it (a history that
// merely begins mid-run, a ring of frees at the end of a process, frees each block once).
bool freed_twice(const std::vector<Event>& history, EventKind free_kind) {
  std::unordered_set<Addr> freed;
  for (const Event& e : history)
    if (e.kind == free_kind && !freed.insert(e.addr).second) return true;
  return false;
}

// No free_completed entries, and an allocation at an address whose free was requested in the history: the
// block was reused, so its free completed unrecorded (a ring that merely ends before the completion shows no
// reuse).
bool reuses_requested(const std::vector<Event>& history) {
  std::unordered_set<Addr> requested;
  for (const Event& e : history) {
    if (e.kind == EventKind::FreeRequested) requested.insert(e.addr);
    if (e.kind == EventKind::Alloc && requested.count(e.addr)) return true;
  }
  return false;
}

// No free_requested entries, and a block allocated in the history whose free completed: its request would be
// in the history too (a history begun mid-run, or PyTorch 2.11's one free_completed of `enabled="state"`,
// completes only blocks allocated before it).
bool completes_own_alloc(const std::vector<Event>& history) {
  std::unordered_set<Addr> allocated;
  for (const Event& e : history) {
    if (e.kind == EventKind::Alloc) allocated.insert(e.addr);
    if (e.kind == EventKind::Free && allocated.count(e.addr)) return true;
  }
  return false;
}

size_t streams_of_allocs(const std::vector<Event>& history) {
  std::set<StreamIndex> streams;
  for (const Event& e : history)
    if (e.kind == EventKind::Alloc) streams.insert(e.stream);
  return streams.size();
}

}  // namespace

SkipReading read_skipped_actions(std::vector<Event>& history, EntryOffsets& offsets,
                                 const std::vector<RecordedSegment>& final_segments, const HistoryIndex* index) {
  SkipReading r;
  Counts c{};
  if (index)
    std::copy(index->counts().begin(), index->counts().end(), c.begin());
  else
    for (const Event& e : history) ++c[static_cast<size_t>(e.kind)];
  const uint64_t allocs = count(c, EventKind::Alloc), requests = count(c, EventKind::FreeRequested),
                 completions = count(c, EventKind::Free);
  if (allocs == 0 && requests + completions > 0 &&
      freed_twice(history, completions ? EventKind::Free : EventKind::FreeRequested)) {
    uint64_t calls = 0;
    for (const Event& e : history) calls += is_make(e.kind) || is_release(e.kind);
    r.history_unusable = true;
    r.skipped.push_back(
        {"alloc",
         fmt::format("no alloc entries while the history frees {} blocks: when and how large each allocation was is "
                     "not recorded, so the history cannot be replayed; read as the allocator's final state{}",
                     std::max(requests, completions),
                     calls ? fmt::format(" (its {} device calls reach {} reserved at most)", calls,
                                         format_size(peak_of_device_calls(history, final_segments)))
                           : std::string())});
    return r;
  }
  if (completions == 0 && requests > 0 && reuses_requested(history)) {
    for (Event& e : history)
      if (e.kind == EventKind::FreeRequested) e.kind = EventKind::Free;
    const size_t streams = streams_of_allocs(history);
    r.skipped.push_back(
        {"free_completed",
         streams > 1 ? fmt::format("frees taken at free_requested: a block another stream still used (record_stream) "
                                   "became reusable only once that stream's work was done, which is not recorded, so "
                                   "stream-ordered frees may be early ({} streams allocate here) and live bytes read "
                                   "low by the blocks awaiting them",
                                   streams)
                     : std::string("frees taken at free_requested: one stream allocates here, so each free completed "
                                   "when it was requested and nothing is lost")});
  } else if (requests == 0 && completions > 0 && completes_own_alloc(history)) {
    r.requests_skipped = true;
    r.skipped.push_back({"free_requested",
                         "no free_requested entries: only when each block became reusable is recorded (what replay "
                         "needs), not when the program freed it; a block another stream still used reads as live "
                         "until its free completed"});
  } else if (requests == 0 && completions == 0 && allocs > 0) {
    std::unordered_set<Addr> seen;
    bool again = false;
    for (const Event& e : history)
      if (e.kind == EventKind::Alloc && !seen.insert(e.addr).second) again = true;
    if (again) {
      const size_t freed = infer_frees(history, offsets);
      r.skipped.push_back(
          {"free_requested, free_completed",
           fmt::format("no free entries at all: {} blocks taken as freed just before their address was allocated "
                       "again (the latest they can have been), the others live to the end; live bytes read high "
                       "and a replay's reuse differs from the recording's",
                       freed)});
    }
  }
  const bool segments_made = count(c, EventKind::SegmentAlloc) > 0, maps = count(c, EventKind::SegmentMap) > 0;
  const bool segments_freed = count(c, EventKind::SegmentFree) > 0, unmaps = count(c, EventKind::SegmentUnmap) > 0;
  if (!segments_made && !maps && (segments_freed || unmaps) && allocates_in_released(history)) {
    if (segments_freed) {
      const size_t made = infer_segment_allocs(history, offsets, final_segments);
      r.skipped.push_back(
          {"segment_alloc",
           fmt::format("no segment_alloc entries: {} segments taken as made just before the first allocation in "
                       "them (as PyTorch makes one for the request that needs it), the others as made before the "
                       "history; a segment made for a request that then went elsewhere is not seen",
                       made)});
    } else {
      r.skipped.push_back({"segment_map",
                           "no segment_map entries: the pages of expandable segments are mapped as requests need "
                           "them, which the history no longer shows; the state at the first entry holds every range "
                           "the history unmaps, so reserved bytes read high until then and a replay's device calls "
                           "differ"});
    }
  }
  if (!segments_freed && !unmaps && (segments_made || maps) && makes_over_unreleased(history, final_segments, index)) {
    const bool expandable = maps && !segments_made;
    const size_t released =
        infer_releases(history, offsets, final_segments, expandable ? EventKind::SegmentMap : EventKind::SegmentAlloc,
                       expandable ? EventKind::SegmentUnmap : EventKind::SegmentFree);
    r.skipped.push_back(
        {expandable ? "segment_unmap" : "segment_free",
         fmt::format("no {} entries: {} {} taken as released at the latest moment they can have been (just before "
                     "a {} made over the same addresses, or at the end); reserved bytes may read high between "
                     "the real release and then, and a replay's device calls may differ",
                     expandable ? "segment_unmap" : "segment_free", released, expandable ? "ranges" : "segments",
                     expandable ? "range" : "segment")});
  }
  return r;
}

}  // namespace fraglab
