#include "sim/placed_replay.h"

#include <algorithm>
#include <map>

#include "allocators/registry.h"
#include "device/call_log_device.h"
#include "device/simulated_gpu.h"

namespace fraglab {

namespace {

constexpr uint64_t kSmallSegment = 2ull << 20;  // PyTorch's small-pool segment size (kSmallBuffer)
constexpr uint64_t kSmallRequest = 1ull << 20;  // PyTorch's largest small-pool request (kSmallSize)

// The blocks of [begin, end): live blocks as active, the gaps between them inactive.
RecordedSegment tile(Addr begin, uint64_t size, bool expandable, bool small_pool,
                     const std::vector<const BlockRecord*>& live, size_t& cursor,
                     const std::vector<uint8_t>& pending_free, const std::vector<AllocId>& id_of,
                     const std::vector<StackId>& stack_of_id) {
  RecordedSegment seg;
  seg.address = begin;
  seg.total_size = size;
  seg.is_expandable = expandable;
  seg.small_pool = small_pool;
  Addr at = begin, end = begin + size;
  bool stream_set = false;
  auto gap = [&](Addr to) {
    if (to > at) seg.blocks.push_back({at, to - at, 0, RecordedBlock::State::Inactive, 0});
  };
  while (cursor < live.size() && live[cursor]->addr < end) {
    const BlockRecord& b = *live[cursor];
    AllocId id = id_of[cursor];
    ++cursor;
    if (b.addr < at) continue;  // cannot happen for a valid policy (checked by --check)
    gap(b.addr);
    auto state = pending_free[id] ? RecordedBlock::State::ActivePendingFree : RecordedBlock::State::ActiveAllocated;
    seg.blocks.push_back({b.addr, b.size, b.requested, state, stack_of_id[id]});
    seg.allocated_size += b.size;
    seg.active_size += b.size;
    seg.requested_size += b.requested;
    if (!stream_set) seg.stream = b.stream, stream_set = true;
    at = b.addr + b.size;
  }
  gap(end);
  return seg;
}

// The pool of the newest allocation placed in a segment (the default pools where none was: a segment of
// the state adopted, say).
std::array<int64_t, 2> pool_of_range(const std::map<Addr, std::pair<uint64_t, PoolIndex>>& placed_at,
                                     const RecordedSegment& seg, const std::vector<PoolInfo>& pools) {
  std::pair<uint64_t, PoolIndex> newest{0, 0};
  bool any = false;
  for (auto it = placed_at.lower_bound(seg.address); it != placed_at.end() && it->first < seg.address + seg.total_size;
       ++it)
    if (!any || it->second.first > newest.first) newest = it->second, any = true;
  return any && newest.second < pools.size() ? pools[newest.second].id : std::array<int64_t, 2>{0, 0};
}

}  // namespace

PlacedReplay replay_placed(const Trace& trace, const PolicySpec& spec, const SimDeviceConfig& config,
                           const std::function<void(const PlacedEvent&)>& sink) {
  SimulatedGpu gpu(config);
  TrackingDevice device(gpu);
  CallLogDevice log(device);  // the policy's segment events, in order
  auto policy = make_policy(spec, log, trace.meta, &trace.events);
  let_policy_enforce(*policy, gpu.limiter());
  ReplayOptions options;
  options.on_oom = OnOom::Skip;
  options.recorded_ooms = false;  // the export shows the recording's OOM entries as they were
  ReplayEngine engine(*policy, device, options);
  engine.set_policy_name("policy '" + spec.text + "'");
  log.follow(engine.event_index());
  engine.establish_initial_state(trace.meta.initial);
  const uint64_t prologue = trace.meta.initial.live_blocks;  // the first events: blocks live at the first entry

  std::vector<uint8_t> pending_free;  // by id: free requested, not completed
  // The pool of the newest allocation placed at each address: a segment's segment_pool_id at the end (a
  // re-import infers pools from the final segments first, traces/formats/pytorch/pool_inference.h).
  std::map<Addr, std::pair<uint64_t, PoolIndex>> pool_placed_at;
  std::vector<StackId> stack_of_id;
  size_t calls_seen = 0;
  // The device calls made since the last flush, tagged with event `index`; `adopted`: establish_initial_state's.
  auto emit_calls = [&](uint64_t index, bool adopted = false) {
    const auto& calls = log.calls();
    for (; calls_seen < calls.size(); ++calls_seen) {
      PlacedEvent p;
      p.event.kind = calls[calls_seen].kind;
      p.event.addr = calls[calls_seen].addr;
      p.event.size = calls[calls_seen].size;
      p.event.time_us = trace.events[index].time_us;
      p.event_index = index;
      p.requested = engine.requested_live();
      p.allocated = engine.allocated_live();
      p.reserved = device.reserved_bytes();
      p.prologue = adopted || index < prologue;
      sink(p);
    }
  };
  auto placed = [&](const Event& e, uint64_t index, const BlockRecord& b) {
    PlacedEvent p;
    p.event = e;
    p.event.addr = b.addr;
    p.block_size = b.size;
    p.alloc_index = b.alloc_index;
    p.event_index = index;
    p.prologue = index < prologue;
    p.requested = engine.requested_live();
    p.allocated = engine.allocated_live();
    p.reserved = device.reserved_bytes();
    return p;
  };
  if (!trace.events.empty()) emit_calls(0, true);  // the segments of the state adopted, before any event

  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    switch (e.kind) {
      case EventKind::Alloc: {
        size_t ooms = engine.result().ooms.size();
        engine.apply(e, i);
        emit_calls(i);  // the segment calls this allocation made come first, as in PyTorch
        if (e.id >= pending_free.size()) pending_free.resize(e.id + 1u), stack_of_id.resize(e.id + 1u);
        pending_free[e.id] = 0;
        stack_of_id[e.id] = e.stack;
        if (engine.result().ooms.size() != ooms) {
          PlacedEvent p;
          p.event = e;
          p.event.kind = EventKind::Oom;
          p.event_index = i;
          p.requested = engine.requested_live();
          p.allocated = engine.allocated_live();
          p.reserved = device.reserved_bytes();
          if (auto cap = device.device().capacity()) p.device_free = *cap > p.reserved ? *cap - p.reserved : 0;
          p.event.addr = p.device_free;
          sink(p);
          break;
        }
        pool_placed_at[engine.blocks()[e.id].addr] = {i, e.pool};
        sink(placed(e, i, engine.blocks()[e.id]));
        break;
      }
      case EventKind::FreeRequested:
        if (e.id < engine.blocks().size() && engine.blocks()[e.id].live) {
          pending_free[e.id] = 1;
          sink(placed(e, i, engine.blocks()[e.id]));
        }
        break;
      case EventKind::Free: {
        bool live = e.id < engine.blocks().size() && engine.blocks()[e.id].live;
        BlockRecord b = live ? engine.blocks()[e.id] : BlockRecord{};
        engine.apply(e, i);
        if (live) {
          pending_free[e.id] = 0;
          sink(placed(e, i, b));
        }
        emit_calls(i);
        break;
      }
      case EventKind::EmptyCache: {
        engine.apply(e, i);
        PlacedEvent p;
        p.event = e;
        p.event_index = i;
        sink(p);
        emit_calls(i);
        break;
      }
      default:
        break;  // the recorder's own device events and OOMs: the policy makes its own
    }
  }

  PlacedReplay out;
  // Final map: live blocks by address, tiled into segments and mapped ranges.
  std::vector<const BlockRecord*> live;
  std::vector<AllocId> ids;
  {
    std::vector<std::pair<Addr, AllocId>> order;
    for (AllocId id = 0; id < engine.blocks().size(); ++id)
      if (engine.blocks()[id].live) order.emplace_back(engine.blocks()[id].addr, id);
    std::sort(order.begin(), order.end());
    for (auto [addr, id] : order) live.push_back(&engine.blocks()[id]), ids.push_back(id);
  }
  pending_free.resize(engine.blocks().size());
  stack_of_id.resize(engine.blocks().size());
  size_t cursor = 0;
  const auto& physical = device.physical();
  for (const DeviceRegion& r : device.regions()) {
    if (!r.is_vmm) {
      // A cudaMalloc'd segment of 2 MiB is PyTorch's small pool's (large-pool segments are larger).
      out.segments.push_back(
          tile(r.addr, r.size, false, r.size <= kSmallSegment, live, cursor, pending_free, ids, stack_of_id));
      continue;
    }
    // An expandable segment is one reserved range per pool: the small pool's when the requests of the
    // blocks live in it are all small ones (a re-import rebuilds each pool's state from its segment_type).
    bool small_range = false;
    for (size_t k = cursor; k < live.size() && live[k]->addr < r.addr + r.size; ++k) {
      if (live[k]->addr < r.addr) continue;
      if (live[k]->requested > kSmallRequest) {
        small_range = false;
        break;
      }
      small_range = true;
    }
    // A reserved range holds memory only where pages are mapped (or mapped again by
    // alias_pages): one segment per contiguous mapped run.
    Addr r_end = r.addr + r.size;
    std::vector<std::pair<Addr, Addr>> runs;
    auto clip = [&](Addr a, Addr e) {
      a = std::max(a, r.addr);
      e = std::min(e, r_end);
      if (a < e) runs.emplace_back(a, e);
    };
    auto it = physical.lower_bound(r.addr);
    if (it != physical.begin() && std::prev(it)->first + std::prev(it)->second > r.addr) --it;
    for (; it != physical.end() && it->first < r_end; ++it) clip(it->first, it->first + it->second);
    const auto& aliases = device.aliases();
    auto at = aliases.lower_bound(r.addr);
    if (at != aliases.begin() && std::prev(at)->first + std::prev(at)->second.size > r.addr) --at;
    for (; at != aliases.end() && at->first < r_end; ++at) clip(at->first, at->first + at->second.size);
    std::sort(runs.begin(), runs.end());
    for (size_t k = 0; k < runs.size();) {
      Addr b = runs[k].first, e = runs[k].second;
      for (++k; k < runs.size() && runs[k].first <= e; ++k) e = std::max(e, runs[k].second);
      while (cursor < live.size() && live[cursor]->addr < b) ++cursor;
      out.segments.push_back(tile(b, e - b, true, small_range, live, cursor, pending_free, ids, stack_of_id));
    }
  }
  for (RecordedSegment& seg : out.segments) seg.pool_id = pool_of_range(pool_placed_at, seg, trace.meta.pools);
  out.result = engine.take_result();
  out.result.policy = spec.text;
  return out;
}

}  // namespace fraglab
