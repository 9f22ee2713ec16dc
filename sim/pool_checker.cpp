#include "sim/pool_checker.h"

#include <algorithm>

#include "allocators/pytorch/caching_allocator.h"
#include "allocators/pytorch/config.h"
#include "allocators/pytorch/gpu_memory.h"
#include "allocators/registry.h"
#include "device/call_log_device.h"
#include "device/hinted_device.h"
#include "device/limiting_device.h"
#include "device/sim_device.h"
#include "sim/capacity.h"
#include "sim/fidelity.h"
#include "traces/formats/pytorch/settings_inference.h"

namespace fraglab {

// A replay of its own rather than the engine's: it needs only the policy's placements and releases,
// not the engine's metrics, and it runs on every snapshot load.
std::optional<PoolMisplacement> find_pool_misplacement(const Trace& trace) {
  if (trace.meta.format != "pytorch-snapshot" || trace.meta.history_absent) return std::nullopt;
  SimDevice upstream(hinted_upstream_config({}));
  HintedDevice hinted(upstream, trace.events, &trace.meta.initial);
  bool gpu_limit = false;
  LimitingDevice limited(hinted, capacity_for(trace, std::nullopt, nullptr, &gpu_limit));
  CallLogDevice device(limited);
  auto policy =
      make_policy(PolicySpec::parse(gpu_limit ? "pytorch:limit=gpu" : "pytorch"), device, trace.meta, &trace.events);
  let_policy_enforce(*policy, limited);
  std::vector<Block> adopted;
  if (!trace.meta.initial.empty())
    if (auto a = policy->adopt_initial_state(trace.meta.initial)) adopted = std::move(*a);
  // By id: the model's block and whether it is live (apart: an optional<Block> element's assignment stalled
  // on its own engaged byte, ~5 ms of a 1.2M-allocation history).
  std::vector<Block> live;
  std::vector<uint8_t> is_live;
  uint64_t allocs = 0, empty_caches = 0, ooms = 0;
  uint64_t last_step = 0;  // the recorded releases since it are malloc's for the next request
  // A segment the model released while serving event i that the recording did not release before it.
  auto kept = [&](size_t calls_before, uint64_t i) -> std::optional<Addr> {
    const auto& log = device.calls();
    for (size_t c = calls_before; c < log.size(); ++c) {
      if (log[c].kind != EventKind::SegmentFree && log[c].kind != EventKind::SegmentUnmap) continue;
      bool recorded = false;
      for (uint64_t j = last_step; j < i && !recorded; ++j)
        recorded =
            (trace.events[j].kind == EventKind::SegmentFree || trace.events[j].kind == EventKind::SegmentUnmap) &&
            trace.events[j].addr == log[c].addr;
      if (!recorded) return log[c].addr;
    }
    return std::nullopt;
  };
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    switch (e.kind) {
      case EventKind::Alloc: {
        const size_t calls_before = device.calls().size();
        std::optional<Block> b = i < adopted.size() ? std::optional<Block>(adopted[i])
                                                    : policy->allocate(AllocRequest{e.id, e.size, e.stream, i, e.pool});
        // Out of memory where the recording served: the reading is wrong where the model cannot say.
        if (!b) return PoolMisplacement{PoolMisplacement::Kind::Unserved, allocs, 0};
        // The collector's or malloc's release-and-retry returned a segment the recording kept.
        if (auto addr = kept(calls_before, i))
          return PoolMisplacement{PoolMisplacement::Kind::KeptSegment, allocs, *addr, EventKind::Alloc};
        if (i >= trace.meta.initial.live_blocks && b->addr != e.addr)
          return PoolMisplacement{PoolMisplacement::Kind::Block, allocs, b->addr};
        if (e.id >= live.size()) live.resize(e.id + 1u), is_live.resize(e.id + 1u);
        live[e.id] = *b;
        is_live[e.id] = 1;
        ++allocs;
        break;
      }
      case EventKind::Free:
        if (e.id < live.size() && is_live[e.id]) policy->deallocate(live[e.id]), is_live[e.id] = 0;
        break;
      case EventKind::Oom: {  // tried where the recording failed it, given back if served
        const size_t calls_before = device.calls().size();
        if (auto b = policy->allocate(AllocRequest{kTransientRequest, e.size, e.stream, i, e.pool})) {
          policy->deallocate(*b);
          // Served from the cache, no device call: the block's segment was not this request's pool's.
          if (device.calls().size() == calls_before)
            return PoolMisplacement{PoolMisplacement::Kind::ServedOom, ooms, b->addr};
        }
        // malloc's recovery before the OOM returned a segment the recording kept
        if (auto addr = kept(calls_before, i))
          return PoolMisplacement{PoolMisplacement::Kind::KeptSegment, ooms, *addr, EventKind::Oom};
        ++ooms;
        break;
      }
      case EventKind::PoolRelease:
        policy->release_pool(e.pool);
        if (e.pool == 0 && e.id == kDroppedEmptyCache) ++empty_caches;  // the importer's, read as none
        break;
      case EventKind::EmptyCache: {
        const size_t calls_before = device.calls().size();
        policy->empty_cache();
        if (e.id == kInferredEmptyCache) break;  // the importer's only: inferred ones are counted by neither side
        // The releases the recording made right after it (the importer put the event before them).
        std::vector<Addr> recorded;
        for (uint64_t j = i + 1; j < trace.events.size(); ++j) {
          EventKind k = trace.events[j].kind;
          if (k == EventKind::SegmentFree || k == EventKind::SegmentUnmap)
            recorded.push_back(trace.events[j].addr);
          else if (k != EventKind::PoolRelease && k != EventKind::EmptyCache)
            break;
        }
        const auto& log = device.calls();
        for (size_t c = calls_before; c < log.size(); ++c)
          if (std::find(recorded.begin(), recorded.end(), log[c].addr) == recorded.end())
            return PoolMisplacement{PoolMisplacement::Kind::KeptSegment, empty_caches, log[c].addr};
        ++empty_caches;
        break;
      }
      default:
        break;
    }
    if (is_replay_event(e.kind) || e.kind == EventKind::Oom) last_step = i + 1;
  }
  return std::nullopt;
}

namespace {

// `fidelity` of the trace as read, under the limit it infers (`gpu_limit`: whether that is the GPU's own).
FidelityResult fidelity_as_read(const Trace& trace, bool* gpu_limit) {
  FidelityOptions options;
  options.capacity = capacity_for(trace, std::nullopt, nullptr, gpu_limit);
  if (*gpu_limit) options.policy = "pytorch:limit=gpu";
  return check_fidelity(trace, options);
}

// Private pools the model told apart (rule 7): each one a disagreement the pools were made to absorb.
size_t pools_told_apart(const Trace& trace) {
  return static_cast<size_t>(
      std::count_if(trace.meta.pools.begin(), trace.meta.pools.end(), [](const PoolInfo& p) { return p.inferred(); }));
}

// Steps of the GPU's own limit followed along the trace as read (gpu_limit_drift), where expandable
// segments map pages under it; 0 elsewhere.
size_t map_limit_steps(const Trace& trace) {
  if (std::none_of(trace.events.begin(), trace.events.end(),
                   [](const Event& e) { return e.kind == EventKind::SegmentMap; }))
    return 0;
  const std::optional<InferredCapacity> inferred = infer_capacity(trace);
  return inferred ? gpu_limit_drift(trace, *inferred).size() : 0;
}

// Both readings replayed exactly: whether the collector's is taken.
bool both_exact_reading(const Trace& collected, const Trace& emptied, bool gpu_limit) {
  // Expandable segments under the GPU's own limit: each release read as malloc's recovery is a refusal the
  // followed limit is brought down to fit, so an inference server's empty_cache() every few requests near
  // the limit replays either way. The program's stands where malloc's needs the limit lowered for it, as
  // before maps were followed (malloc's recoveries lower it where only they replay: a program that never
  // empties the cache, with max_split_size_mb).
  if (map_limit_steps(collected) > map_limit_steps(emptied)) return false;
  // Both replay the same calls, and the collector's reading needs a GPU limit no OOM shows: runs that free
  // every cached block are release_cached_blocks either way, and a program's empty_cache() at the end of a
  // step (reserved bytes at their peak, so the next segment passes it) fits a GPU limit at that peak. Only
  // runs that release part of the cache (release_available_cached_blocks, with max_split_size) prove the
  // limit; those make the emptied reading fail. The program's empty_cache() stands, as before such limits
  // were tried.
  if (gpu_limit) return false;
  // Both replay the same calls (malloc's last resort, release_cached_blocks, empties the cache as the
  // program would): malloc's reading stands (what the importer read before it marked these runs), so
  // that other policies replayed on the trace are not handed an empty_cache() the program may not have
  // made, unless it needed more pools told apart by the model.
  return pools_told_apart(collected) <= pools_told_apart(emptied);
}

}  // namespace

// The importer's marked EmptyCache events (kEmptyCacheOrCollector): the runs of releases before a new
// segment that torch.cuda.empty_cache() or malloc's garbage collector made. Both readings are replayed
// (the collector's under the memory fraction that reproduces its releases, capacity_for), each with the
// pools inferred for it. The one the model reproduces is taken; where both are reproduced, the one that
// needed fewer pools told apart by the model (rule 7 can absorb a wrong reading into invented pools),
// malloc's on a tie; where neither is reproduced, the one that agrees longer, from which infer_pools()
// reads the marks run by run (a history where both happened).
CollectorRunReading collector_reading_is_right(const Trace& emptied, Trace& collected) {
  bool gpu_limit = false;
  // How far the model follows each reading (the capacity inferred as `fidelity` infers it).
  const FidelityResult by_emptying = fidelity_as_read(emptied, &gpu_limit);
  const FidelityResult by_collector = fidelity_as_read(collected, &gpu_limit);
  // Read this way, the runs may be malloc's retries under the GPU's own limit (no fraction: capacity_for):
  // the trace says so for the replays to come, should this reading be taken.
  collected.meta.gpu_limit = gpu_limit;
  if (by_emptying.exact != by_collector.exact) return {by_collector.exact, true, std::nullopt};
  if (!by_emptying.exact) {
    const bool take_collected = by_collector.replay_events > by_emptying.replay_events;
    return {take_collected, false, (take_collected ? by_collector : by_emptying).event_index};
  }
  return {both_exact_reading(collected, emptied, gpu_limit), true, std::nullopt};
}

// Requests try_mempool_fallback served: a request that the rules gave to a private pool (it landed in the
// pool's segment) and that made no segment, at a moment when the recorded reserved bytes and the segment
// a default-pool request of its size needs (get_allocation_size of round_size) pass the limit, so that
// alloc_block failed. Read as default-pool requests with their pools opted in (use_on_oom), the trace
// must replay exactly: else they stay the pools' own (a use_mem_pool request at the limit reads the same).
// Without a limit nothing can have fallen back.
std::optional<FallbackReading> find_fallbacks(const Trace& trace) {
  if (trace.meta.format != "pytorch-snapshot" || trace.meta.history_absent) return std::nullopt;
  const std::optional<uint64_t> limit = capacity_for(trace, std::nullopt);
  if (!limit) return std::nullopt;
  detail::PytorchAllocatorConfig config;
  config.apply_recorded(trace.meta.allocator_settings);
  FallbackReading reading;
  uint64_t reserved = trace.meta.initial.reserved(), allocs = 0;
  bool grew = false;  // a segment (or mapping) since the last request
  for (const Event& e : trace.events) {
    if (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap) reserved += e.size, grew = true;
    if (e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentUnmap) reserved -= e.size;
    if (e.kind != EventKind::Alloc) continue;
    const uint64_t segment =
        detail::pytorch_allocation_size(detail::pytorch_round_size(e.size, config), config.large_segment_size);
    if (e.pool != 0 && !grew && allocs >= trace.meta.initial.live_blocks && reserved + segment > *limit) {
      reading.allocs.push_back(allocs);
      if (std::find(reading.pools.begin(), reading.pools.end(), e.pool) == reading.pools.end())
        reading.pools.push_back(e.pool);
    }
    grew = false;
    ++allocs;
  }
  if (reading.allocs.empty()) return std::nullopt;
  Trace fallen = trace;
  for (PoolIndex p : reading.pools) fallen.meta.pools[p].use_on_oom = true;
  uint64_t ordinal = 0;
  size_t next = 0;
  for (Event& e : fallen.events)
    if (e.kind == EventKind::Alloc) {
      if (next < reading.allocs.size() && reading.allocs[next] == ordinal) e.pool = 0, ++next;
      ++ordinal;
    }
  FidelityOptions options;
  options.capacity = limit;
  if (!check_fidelity(fallen, options).exact) return std::nullopt;
  return reading;
}

// fidelity's first divergence, under the capacity fidelity infers (traces/formats/pytorch/settings_inference.h).
std::optional<uint64_t> find_divergence(const Trace& trace) {
  bool gpu_limit = false;
  const FidelityResult r = fidelity_as_read(trace, &gpu_limit);
  if (r.exact) return std::nullopt;
  return r.event_index;
}

// The known GPUs larger than the one the pytorch policy assumes for the trace (the least whose expandable
// ranges hold its maps, allocators/pytorch/gpu_memory.h), where the trace has expandable segments.
std::vector<uint64_t> other_gpu_totals(const Trace& trace) {
  const auto& initial = trace.meta.initial.segments;
  const bool expandable =
      std::any_of(initial.begin(), initial.end(), [](const RecordedSegment& s) { return s.is_expandable; }) ||
      std::any_of(trace.events.begin(), trace.events.end(),
                  [](const Event& e) { return e.kind == EventKind::SegmentMap; });
  if (!expandable) return {};
  const uint64_t assumed = detail::gpu_total_memory_for(&trace.events, trace.meta, detail::kH100TotalMemory);
  std::vector<uint64_t> larger;
  for (uint64_t total : detail::kKnownGpuTotals)
    if (total > assumed) larger.push_back(total);
  return larger;
}

const SnapshotModel& pytorch_snapshot_model() {
  static const SnapshotModel kModel{find_pool_misplacement, collector_reading_is_right, find_fallbacks, find_divergence,
                                    other_gpu_totals};
  return kModel;
}

}  // namespace fraglab
