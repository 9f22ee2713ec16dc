#include "sim/pool_checker.h"

#include <algorithm>

#include "allocators/registry.h"
#include "device/call_log_device.h"
#include "device/hinted_device.h"
#include "device/limiting_device.h"
#include "device/sim_device.h"
#include "sim/capacity.h"

namespace fraglab {

// A replay of its own rather than the engine's: it needs only the policy's placements and releases,
// not the engine's metrics, and it runs on every snapshot load.
std::optional<PoolMisplacement> find_pool_misplacement(const Trace& trace) {
  if (trace.meta.format != "pytorch-snapshot" || trace.meta.history_absent) return std::nullopt;
  SimDevice upstream(hinted_upstream_config({}));
  HintedDevice hinted(upstream, trace.events, &trace.meta.initial);
  LimitingDevice limited(hinted, capacity_for(trace, std::nullopt));
  CallLogDevice device(limited);
  auto policy = make_policy(PolicySpec::parse("pytorch"), device, trace.meta, &trace.events);
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
        if (e.id != 0) break;  // the importer's only: inferred ones are counted by neither side
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

void install_pool_checker() { set_pool_checker(find_pool_misplacement); }

}  // namespace fraglab
