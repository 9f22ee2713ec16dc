#include "sim/pool_checker.h"

#include <algorithm>

#include "allocators/registry.h"
#include "device/call_log_device.h"
#include "device/hinted_device.h"
#include "device/limiting_device.h"
#include "device/sim_device.h"
#include "sim/capacity.h"
#include "sim/fidelity.h"

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
  std::vector<std::optional<Block>> live;
  uint64_t allocs = 0, empty_caches = 0;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    switch (e.kind) {
      case EventKind::Alloc: {
        std::optional<Block> b = i < adopted.size() ? std::optional<Block>(adopted[i])
                                                    : policy->allocate(AllocRequest{e.id, e.size, e.stream, i, e.pool});
        if (!b) return std::nullopt;  // out of memory: the state says no more about pools
        if (i >= trace.meta.initial.live_blocks && b->addr != e.addr)
          return PoolMisplacement{PoolMisplacement::Kind::Block, allocs, b->addr};
        if (e.id >= live.size()) live.resize(e.id + 1u);
        live[e.id] = b;
        ++allocs;
        break;
      }
      case EventKind::Free:
        if (e.id < live.size() && live[e.id]) policy->deallocate(*live[e.id]), live[e.id].reset();
        break;
      case EventKind::Oom:  // tried where the recording failed it, given back if served
        if (auto b = policy->allocate(AllocRequest{kTransientRequest, e.size, e.stream, i, e.pool}))
          policy->deallocate(*b);
        break;
      case EventKind::PoolRelease:
        policy->release_pool(e.pool);
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
  }
  return std::nullopt;
}

namespace {

// How far the model follows the recording read one way: the requests it replays before the first
// disagreement, all of them when it agrees throughout (the capacity inferred as `fidelity` infers it).
uint64_t agreement(const Trace& trace, bool* exact, bool* gpu_limit) {
  FidelityOptions options;
  options.capacity = capacity_for(trace, std::nullopt, nullptr, gpu_limit);
  if (*gpu_limit) options.policy = "pytorch:limit=gpu";
  const FidelityResult r = check_fidelity(trace, options);
  *exact = r.exact;
  return r.replay_events;
}

// Private pools the model told apart (rule 7): each one a disagreement the pools were made to absorb.
size_t pools_told_apart(const Trace& trace) {
  return static_cast<size_t>(
      std::count_if(trace.meta.pools.begin(), trace.meta.pools.end(), [](const PoolInfo& p) { return p.inferred(); }));
}

}  // namespace

// The importer's marked EmptyCache events (kEmptyCacheOrCollector): the runs of releases before a new
// segment that torch.cuda.empty_cache() or malloc's garbage collector made. Both readings are replayed
// (the collector's under the memory fraction that reproduces its releases, capacity_for), each with the
// pools inferred for it. The one the model reproduces is taken; where both are reproduced, the one that
// needed fewer pools told apart by the model (rule 7 can absorb a wrong reading into invented pools),
// malloc's on a tie; where neither is reproduced, the one that agrees longer. All of a trace's marks are
// read the same way: a history where both happened is read as the one that explains more of it.
bool collector_reading_is_right(const Trace& emptied, Trace& collected) {
  bool emptied_exact = false, collected_exact = false, gpu_limit = false;
  const uint64_t by_emptying = agreement(emptied, &emptied_exact, &gpu_limit);
  const uint64_t by_collector = agreement(collected, &collected_exact, &gpu_limit);
  // Read this way, the runs may be malloc's retries under the GPU's own limit (no fraction: capacity_for):
  // the trace says so for the replays to come, should this reading be taken.
  collected.meta.gpu_limit = gpu_limit;
  if (emptied_exact != collected_exact) return collected_exact;
  if (!emptied_exact) return by_collector > by_emptying;
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

void install_pool_checker() {
  set_pool_checker(find_pool_misplacement);
  set_collector_run_resolver(collector_reading_is_right);
}

}  // namespace fraglab
