#include "gui/model/recorded_run.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "allocators/pytorch/caching_allocator.h"
#include "gui/model/free_space.h"

namespace fraglab::gui {

namespace {

PoolIndex pool_index_of(const TraceMeta& meta, const std::array<int64_t, 2>& id) {
  for (size_t i = 0; i < meta.pools.size(); ++i)
    if (meta.pools[i].id == id) return static_cast<PoolIndex>(i);
  return 0;
}

}  // namespace

uint64_t recorded_block_size(uint64_t requested, const detail::PytorchAllocatorConfig& config, uint64_t free_span,
                             bool expandable, bool no_split) {
  const uint64_t rounded = detail::pytorch_round_size(requested, config);
  if (free_span <= rounded) return rounded;
  if (no_split) return free_span;
  if (rounded <= detail::kSmallSize || expandable) return rounded;  // split when >= 512 bytes remain: always
  const bool split = rounded < config.max_split_size && free_span - rounded > detail::kSmallSize;
  return split ? rounded : free_span;
}

bool has_recorded_layout(const Trace& trace) {
  if (!trace.meta.initial.segments.empty()) return true;
  return std::any_of(trace.events.begin(), trace.events.end(), [](const Event& e) { return is_device_event(e.kind); });
}

RecordedState::RecordedState(const Trace& trace, bool keep_blocks) : trace_(trace), keep_blocks_(keep_blocks) {
  try {
    config_.apply_recorded(trace.meta.allocator_settings);
  } catch (const std::exception&) {
    config_ = {};  // settings this model cannot read: PyTorch's defaults
  }
  for (const RecordedSegment& s : trace.meta.initial.segments) {
    add_region(s.address, s.total_size, s.is_expandable, pool_index_of(trace.meta, s.pool_id));
    for (const RecordedBlock& b : s.blocks)
      if (b.state != RecordedBlock::State::Inactive && b.size > 0) initial_size_[b.address] = b.size;
  }
}

void RecordedState::add_region(Addr addr, uint64_t size, bool vmm, PoolIndex pool) {
  if (size == 0) return;
  reserved += size;
  if (vmm) {
    // Pages mapped next to mapped pages of an expandable segment extend one region.
    auto next = regions_.find(addr + size);
    if (next != regions_.end() && next->second.vmm) {
      size += next->second.size;
      pool = std::max(pool, next->second.pool);
      regions_.erase(next);
    }
    auto prev = regions_.lower_bound(addr);
    if (prev != regions_.begin()) {
      --prev;
      if (prev->second.vmm && prev->first + prev->second.size == addr) {
        prev->second.size += size;
        prev->second.pool = std::max(pool, prev->second.pool);
        return;
      }
    }
  }
  regions_[addr] = Region{size, vmm, pool};
}

// Takes [addr, addr + size) out of the regions (a cudaFree, or pages unmapped from the middle
// of a mapped run, which splits it).
void RecordedState::remove_range(Addr addr, uint64_t size) {
  Addr end = addr + size;
  auto it = regions_.upper_bound(addr);
  if (it != regions_.begin()) --it;
  while (it != regions_.end() && it->first < end) {
    Addr r0 = it->first, r1 = it->first + it->second.size;
    if (r1 <= addr) {
      ++it;
      continue;
    }
    Region keep = it->second;
    it = regions_.erase(it);
    Addr cut0 = std::max(r0, addr), cut1 = std::min(r1, end);
    reserved -= std::min(reserved, cut1 - cut0);
    if (r0 < cut0) regions_[r0] = Region{cut0 - r0, keep.vmm, keep.pool};
    if (cut1 < r1) {
      regions_[cut1] = Region{r1 - cut1, keep.vmm, keep.pool};
      break;  // the rest of the region lies past the range
    }
  }
}

void RecordedState::mark_pool(Addr addr, PoolIndex pool) {
  if (pool == 0) return;
  auto it = regions_.upper_bound(addr);
  if (it == regions_.begin()) return;
  --it;
  if (addr < it->first + it->second.size) it->second.pool = pool;
}

// The free block a request takes starts at its address and runs to the next live block of the
// segment or the segment's end (PyTorch merges adjacent free blocks); only large-pool segments
// keep a free block whole, and only large-pool blocks live in them.
uint64_t RecordedState::block_size(const Event& e) const {
  const bool no_split = e.pool < trace_.meta.pools.size() && trace_.meta.pools[e.pool].no_split;
  if (e.size <= detail::kSmallSize && !no_split) return detail::pytorch_round_size(e.size, config_);
  auto region = regions_.upper_bound(e.addr);
  if (region == regions_.begin()) return recorded_block_size(e.size, config_);
  --region;
  Addr end = region->first + region->second.size;
  if (e.addr >= end) return recorded_block_size(e.size, config_);
  if (auto next = large_.upper_bound(e.addr); next != large_.end()) end = std::min(end, next->first);
  return recorded_block_size(e.size, config_, end - e.addr, region->second.vmm, no_split);
}

void RecordedState::apply(uint64_t index) {
  const Event& e = trace_.events[index];
  switch (e.kind) {
    case EventKind::Alloc: {
      uint64_t size = 0;
      if (index < trace_.meta.initial.live_blocks)
        if (auto it = initial_size_.find(e.addr); it != initial_size_.end()) size = it->second;
      if (size == 0) size = block_size(e);
      if (size > detail::kSmallSize) large_.insert_or_assign(e.addr, size);
      if (e.id >= size_of_id_.size()) {
        size_of_id_.resize(e.id + 1u, {0, 0});
        addr_of_id_.resize(e.id + 1u, 0);
        awaiting_of_id_.resize(e.id + 1u, false);
      }
      size_of_id_[e.id] = {size, e.size};
      awaiting_of_id_[e.id] = false;
      addr_of_id_[e.id] = e.addr;
      requested += e.size;
      allocated += size;
      if (keep_blocks_) {
        blocks_.insert_or_assign(e.addr, Block{size, e.size, index, e.stream, e.pool});
        mark_pool(e.addr, e.pool);
      }
      break;
    }
    case EventKind::FreeRequested: {  // the program's free(): out of allocated_bytes, still in memory
      if (e.id >= size_of_id_.size() || awaiting_of_id_[e.id] || size_of_id_[e.id].first == 0) break;
      const uint64_t size = size_of_id_[e.id].first;
      allocated -= std::min(allocated, size);
      awaiting_streams += size;
      awaiting_of_id_[e.id] = true;
      if (keep_blocks_)
        if (auto it = blocks_.find(addr_of_id_[e.id]); it != blocks_.end()) it->second.awaiting_streams = true;
      break;
    }
    case EventKind::Free: {
      if (e.id >= size_of_id_.size()) break;
      auto& [size, req] = size_of_id_[e.id];
      requested -= std::min(requested, req);
      if (awaiting_of_id_[e.id]) {  // out of allocated_bytes since its free_requested
        awaiting_streams -= std::min(awaiting_streams, size);
        awaiting_of_id_[e.id] = false;
      } else {  // a trace without free_requested entries
        allocated -= std::min(allocated, size);
      }
      if (size > detail::kSmallSize) large_.erase(addr_of_id_[e.id]);
      size = req = 0;
      if (keep_blocks_) blocks_.erase(addr_of_id_[e.id]);
      break;
    }
    case EventKind::SegmentAlloc:
      add_region(e.addr, e.size, false, 0);
      break;
    case EventKind::SegmentMap:
      add_region(e.addr, e.size, true, 0);
      break;
    case EventKind::SegmentFree:
    case EventKind::SegmentUnmap:
      remove_range(e.addr, e.size);
      break;
    default:
      break;  // empty_cache, oom, pool release: no change of memory
  }
}

std::unique_ptr<RunResult> recorded_result(const TraceInfo& info, const std::function<bool(uint64_t)>& progress) {
  const Trace& trace = info.trace;
  if (!has_recorded_layout(trace))
    throw std::invalid_argument(
        "the trace records no allocator layout (no segment calls): nothing to show as recorded");
  auto result = std::make_unique<RunResult>();
  ReplayResult& r = result->replay;
  r.policy = kRecordedSpec;
  uint64_t n = trace.events.size();
  for (auto& s : result->series) s.reserve(n);
  RecordedState state(trace, false);
  // PyTorch records a segment call before the request it serves (segment_alloc or segment_map, then the
  // alloc): a call that sets the reserved peak hands the peak to that request, whose state has its block
  // placed, as a policy lane's peak (the replay engine's) is the request's and `diagnose` looks there.
  bool peak_awaits_request = false;
  for (uint64_t i = 0; i < n; ++i) {
    if ((i & 0xffff) == 0 && progress && !progress(i)) return nullptr;
    const Event& e = trace.events[i];
    state.apply(i);
    switch (e.kind) {
      case EventKind::Alloc:
        ++r.allocs;
        break;
      case EventKind::Free:
        ++r.frees;
        break;
      case EventKind::EmptyCache:
        ++r.empty_caches;
        break;
      case EventKind::SegmentAlloc:
        ++r.calls.segment_allocs;
        break;
      case EventKind::SegmentFree:
        ++r.calls.segment_frees;
        break;
      case EventKind::SegmentMap:
        ++r.calls.maps;
        break;
      case EventKind::SegmentUnmap:
        ++r.calls.unmaps;
        break;
      case EventKind::Oom:
        r.ooms.push_back({i, e.size, e.stream, state.reserved, state.allocated, true});
        break;
      default:
        break;
    }
    if ((e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap) &&
        (result->device_grows.empty() || result->device_grows.back() != i))
      result->device_grows.push_back(i);
    auto peak = [i](Peak& p, uint64_t bytes) {
      if (bytes > p.bytes) p = {bytes, i};
    };
    peak(r.requested, state.requested);
    peak(r.allocated, state.allocated);
    const bool grows = e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap;
    if (state.reserved > r.reserved.bytes) {
      peak_awaits_request = grows;
    } else if (peak_awaits_request && !grows) {
      if (e.kind == EventKind::Alloc) r.reserved.event_index = i;
      peak_awaits_request = false;
    }
    peak(r.reserved, state.reserved);
    result->series[0].set(i, state.requested);
    result->series[1].set(i, state.allocated);
    result->series[2].set(i, state.reserved);
  }
  r.events = n;
  r.final_requested = state.requested;
  r.final_allocated = state.allocated;
  r.final_reserved = state.reserved;
  r.live_bytes_bound = r.requested.bytes;
  for (int k = 0; k < kSeriesCount; ++k) {
    result->series[k].finish(n);
    result->pyramid[k] = MinMaxPyramid(result->series[k].kib());
  }
  return result;
}

CursorSnapshot recorded_snapshot(const TraceInfo& info, uint64_t event_index, const std::function<bool()>& cancelled) {
  const Trace& trace = info.trace;
  if (!has_recorded_layout(trace))
    throw std::invalid_argument(
        "the trace records no allocator layout (no segment calls): nothing to show as recorded");
  RecordedState state(trace);
  uint64_t end = std::min<uint64_t>(event_index + 1, trace.events.size());
  for (uint64_t i = 0; i < end; ++i) {
    if ((i & 0xffff) == 0 && cancelled()) break;
    state.apply(i);
  }
  CursorSnapshot snap;
  snap.event_index = event_index;
  snap.blocks.reserve(state.blocks().size());
  for (const auto& [addr, b] : state.blocks())
    snap.blocks.push_back({addr, b.size, b.requested, b.alloc_index, b.stream, b.awaiting_streams});
  for (const auto& [addr, r] : state.regions()) {
    snap.regions.push_back({addr, r.size, r.vmm});
    snap.region_pools.push_back(r.pool);
    snap.physical.emplace_back(addr, r.size);
  }
  FreeSpace free = free_space(snap);
  snap.frag = free.frag;
  snap.awaiting_streams = free.awaiting_streams;
  snap.free_ranges = std::move(free.sizes);
  snap.probed = true;
  snap.probe_note = "n/a: the recording";  // no policy to ask
  return snap;
}

}  // namespace fraglab::gui
