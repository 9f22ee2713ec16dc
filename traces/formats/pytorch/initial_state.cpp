#include "traces/formats/pytorch/initial_state.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "traces/addr_map.h"

namespace fraglab {

namespace {

constexpr uint64_t kSmallSegment = 2ull << 20;  // PyTorch's small-pool segment (kSmallBuffer)

using SegmentMap = std::map<Addr, RecordedSegment>;  // by address

RecordedSegment bare(const RecordedSegment& s) {
  RecordedSegment out = s;
  out.blocks.clear();
  out.allocated_size = out.active_size = out.requested_size = 0;
  return out;
}

RecordedSegment from_entry(const Event& e, bool expandable, uint64_t large_page) {
  RecordedSegment s;
  s.address = e.addr;
  s.total_size = e.size;
  s.stream = e.stream;
  s.is_expandable = expandable;
  // cudaMalloc'd small-pool segments are exactly 2 MiB; an expandable large pool maps whole large pages.
  s.small_pool = expandable ? e.size % large_page != 0 : e.size == kSmallSegment;
  return s;
}

// The mapped ranges of expandable segments: removing [a, a+s) splits the range holding it.
void unmap_range(SegmentMap& ranges, Addr a, uint64_t s) {
  auto it = ranges.upper_bound(a);
  if (it == ranges.begin()) return;
  --it;
  RecordedSegment r = it->second;
  if (a + s > r.address + r.total_size) return;  // not inside one range: inconsistent input, ignored
  ranges.erase(it);
  if (a > r.address) {
    RecordedSegment left = r;
    left.total_size = a - r.address;
    ranges.emplace(left.address, left);
  }
  if (a + s < r.address + r.total_size) {
    RecordedSegment right = r;
    right.address = a + s;
    right.total_size = r.address + r.total_size - (a + s);
    ranges.emplace(right.address, right);
  }
}

// Adding [a, a+s) joins the ranges it touches (one contiguous mapped range is one snapshot segment).
void map_range(SegmentMap& ranges, RecordedSegment added) {
  auto next = ranges.lower_bound(added.address);
  if (next != ranges.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.total_size == added.address && prev->second.stream == added.stream) {
      RecordedSegment merged = prev->second;
      merged.total_size += added.total_size;
      ranges.erase(prev);
      added = merged;
    }
  }
  next = ranges.lower_bound(added.address + added.total_size);
  if (next != ranges.end() && next->first == added.address + added.total_size && next->second.stream == added.stream) {
    added.total_size += next->second.total_size;
    ranges.erase(next);
  }
  ranges[added.address] = added;
}

// The pool kind the history's requests show for ranges an expandable segment unmapped: a whole number of
// large pages may be either pool's (10 small pages are one large one), but a request of more than 1 MiB
// (kSmallSize; round_size keeps each side of it) lands only in a large pool's segment and a smaller one only
// in a small pool's. Any request in the range's addresses, mapped before or after, is evidence: the addresses
// are one ExpandableSegment's reservation. By the range's start; empty where no range needs it.
constexpr uint64_t kSmallRequest = 1ull << 20;  // kSmallSize

std::map<Addr, std::pair<Addr, bool>> pool_kind_by_requests(const std::vector<Event>& history, uint64_t large_page,
                                                            const HistoryIndex* index) {
  std::vector<std::pair<Addr, Addr>> uncertain;  // [start, end) of each unmap that is a whole number of large pages
  for_each_other_entry(history, index, [&](size_t i) {
    const Event& e = history[i];
    if (e.kind == EventKind::SegmentUnmap && e.size % large_page == 0) uncertain.emplace_back(e.addr, e.addr + e.size);
  });
  if (uncertain.empty()) return {};
  std::sort(uncertain.begin(), uncertain.end());
  std::vector<std::pair<Addr, Addr>> merged;  // disjoint
  for (const auto& r : uncertain)
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  std::map<Addr, std::pair<Addr, bool>> kinds;  // start -> (end, small)
  for (const Event& e : history) {
    if (e.kind != EventKind::Alloc) continue;
    auto it = std::upper_bound(merged.begin(), merged.end(), std::make_pair(e.addr, ~Addr{0}));
    if (it == merged.begin() || e.addr >= std::prev(it)->second) continue;
    kinds.emplace(std::prev(it)->first, std::make_pair(std::prev(it)->second, e.size <= kSmallRequest));
    if (kinds.size() == merged.size()) break;
  }
  return kinds;
}

// The kind the requests show for the range at `a`, if any.
std::optional<bool> small_by_requests(const std::map<Addr, std::pair<Addr, bool>>& kinds, Addr a) {
  auto it = kinds.upper_bound(a);
  if (it == kinds.begin()) return std::nullopt;
  --it;
  if (a >= it->second.first) return std::nullopt;
  return it->second.second;
}

// Segments and mapped ranges at the first entry: the final ones, with the history undone backwards.
SegmentMap segments_at_start(const std::vector<Event>& history, const std::vector<RecordedSegment>& final_segments,
                             uint64_t large_page, const HistoryIndex* index) {
  SegmentMap segments, ranges;
  const std::map<Addr, std::pair<Addr, bool>> kinds = pool_kind_by_requests(history, large_page, index);
  for (const RecordedSegment& s : final_segments) (s.is_expandable ? ranges : segments)[s.address] = bare(s);
  for_each_other_entry_backwards(history, index, [&](size_t i) {
    const Event* e = &history[i];
    switch (e->kind) {
      case EventKind::SegmentAlloc:
        segments.erase(e->addr);
        break;
      case EventKind::SegmentFree:
        segments.emplace(e->addr, from_entry(*e, false, large_page));
        break;
      case EventKind::SegmentMap:
        unmap_range(ranges, e->addr, e->size);
        break;
      case EventKind::SegmentUnmap: {
        RecordedSegment r = from_entry(*e, true, large_page);
        // Pages of the segment an adjacent range belongs to: take its pool and kind. A range that is
        // not a whole number of large pages is the small pool's for certain, so a large neighbour is
        // another ExpandableSegment (another pool, or the same pool's other kind) and lends nothing.
        // The pool taken is a guess either way: the model's check revises it
        // (traces/formats/pytorch/pool_inference.cpp). Where the history's requests in the range show its
        // kind, a neighbour of the other kind is another segment (a side stream's large segment reserved
        // right after its small one) and lends nothing.
        const std::optional<bool> shown = r.small_pool ? std::nullopt : small_by_requests(kinds, e->addr);
        if (shown) r.small_pool = *shown;
        auto near = ranges.lower_bound(e->addr);
        if (near != ranges.begin()) --near;
        if (near != ranges.end() && near->second.stream == r.stream &&
            (shown ? near->second.small_pool == r.small_pool : !r.small_pool || near->second.small_pool)) {
          r.small_pool = near->second.small_pool;
          r.pool_id = near->second.pool_id;
        }
        map_range(ranges, r);
        break;
      }
      default:
        break;
    }
  });
  segments.merge(ranges);
  return segments;
}

struct StartBlock {
  RecordedBlock block;
  StreamIndex stream = 0;
  bool freed = false;  // its free_completed has been passed in the forward scan
};

// Blocks allocated before the first entry: addresses whose first entry frees them, and blocks the
// final segments hold allocated that the history never mentions. `allocated`: see reconstruct_initial_state.
std::map<Addr, StartBlock> live_at_start(const std::vector<Event>& history,
                                         const std::vector<RecordedSegment>& final_segments, const AddrMap* allocated) {
  std::map<Addr, StartBlock> start;
  AddrMap seen, live;  // used as sets (one flat table each, no node per address)
  for (const Event& e : history) {
    if (allocated) break;  // no entry frees an address first: the allocated addresses are known
    bool free_entry = e.kind == EventKind::Free || e.kind == EventKind::FreeRequested;
    if (e.kind == EventKind::Alloc) {
      live.insert(e.addr, 0);
      seen.insert(e.addr, 0);
    } else if (free_entry && !(e.kind == EventKind::Free && live.erase(e.addr)) && !live.find(e.addr) &&
               seen.insert(e.addr, 0)) {
      StartBlock& b = start[e.addr];
      b.block.address = e.addr;
      b.block.requested_size = e.size;
      b.block.stack = e.stack;
      // Its free was requested before the history began when the first entry completes it.
      b.block.state =
          e.kind == EventKind::Free ? RecordedBlock::State::ActivePendingFree : RecordedBlock::State::ActiveAllocated;
      b.stream = e.stream;
    }
  }
  const AddrMap& mentioned = allocated ? *allocated : seen;
  for (const RecordedSegment& s : final_segments)
    for (const RecordedBlock& blk : s.blocks)
      if (blk.state != RecordedBlock::State::Inactive && !mentioned.find(blk.address))
        start[blk.address] = StartBlock{blk, s.stream, false};
  return start;
}

const RecordedSegment* holding(const SegmentMap& segments, Addr a) {
  auto it = segments.upper_bound(a);
  if (it == segments.begin()) return nullptr;
  --it;
  return a < it->first + it->second.total_size ? &it->second : nullptr;
}

// Where a block freed in the history ended: the first allocation that lands in the space after it,
// before it is freed, starts where the free block after it started. Unless the free block went first:
// pages an expandable segment unmaps while the block is live (an empty_cache() between two steps) were
// free, so the block ends before them, and an allocation landing there once they are mapped again says
// nothing of its end (a block then took 2.6 GB of freed pages as its own, and the model kept them
// mapped): the space after the block stops at the first such range, and a block no allocation settles
// before it is left to the model's estimate from its request.
void find_block_ends(const std::vector<Event>& history, std::map<Addr, StartBlock>& start,
                     std::map<Addr, Addr>& boundary) {
  // The scan ends once every block is settled (freed, or its end found): a recording from process
  // start has none to settle, and need not walk its millions of entries again.
  size_t open = 0;
  for (const auto& [addr, b] : start) open += b.block.size == 0 && boundary.count(addr);
  for (auto e = history.begin(); open > 0 && e != history.end(); ++e) {
    if (e->kind == EventKind::Free) {
      if (auto it = start.find(e->addr); it != start.end() && !it->second.freed) {
        it->second.freed = true;
        if (it->second.block.size == 0 && boundary.count(it->first)) --open;
      }
      continue;
    }
    if (e->kind == EventKind::SegmentUnmap) {
      auto it = start.lower_bound(e->addr);
      if (it == start.begin()) continue;
      --it;
      auto end = boundary.find(it->first);
      if (!it->second.freed && it->second.block.size == 0 && end != boundary.end() && e->addr < end->second)
        end->second = e->addr;
      continue;
    }
    if (e->kind != EventKind::Alloc) continue;
    auto it = start.lower_bound(e->addr);
    if (it == start.begin()) continue;
    --it;
    StartBlock& b = it->second;
    auto end = boundary.find(it->first);
    if (b.freed || b.block.size != 0 || end == boundary.end() || e->addr >= end->second) continue;
    b.block.size = e->addr - it->first;
    --open;
  }
}

}  // namespace

InitialState reconstruct_initial_state(const std::vector<Event>& history,
                                       const std::vector<RecordedSegment>& final_segments, uint64_t large_page,
                                       const AddrMap* allocated, const HistoryIndex* index) {
  InitialState out;
  SegmentMap segments = segments_at_start(history, final_segments, large_page, index);
  std::map<Addr, StartBlock> start = live_at_start(history, final_segments, allocated);

  // Each live block ends at the latest where the next one (or its segment) begins.
  std::map<Addr, Addr> boundary;
  for (auto it = start.begin(); it != start.end(); ++it) {
    const RecordedSegment* seg = holding(segments, it->first);
    if (!seg) continue;
    Addr end = seg->address + seg->total_size;
    auto next = std::next(it);
    if (next != start.end() && next->first < end) end = next->first;
    boundary[it->first] = end;
  }
  find_block_ends(history, start, boundary);

  for (auto& [addr, b] : start) {
    auto it = segments.upper_bound(addr);
    if (boundary.find(addr) == boundary.end() || it == segments.begin()) {
      ++out.unplaced_frees;
      continue;
    }
    RecordedSegment& seg = std::prev(it)->second;
    RecordedBlock blk = b.block;
    if (blk.requested_size == 0 && blk.size != 0) {  // not recorded (PyTorch 2.0): the block's size
      blk.requested_size = blk.size;
      ++out.estimated_requests;
    }
    seg.allocated_size += blk.size;
    seg.active_size += blk.size;
    seg.requested_size += blk.requested_size;
    seg.blocks.push_back(blk);
    ++out.live_blocks;
  }
  for (auto& [addr, seg] : segments) out.segments.push_back(std::move(seg));
  return out;
}

}  // namespace fraglab
