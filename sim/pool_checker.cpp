#include "sim/pool_checker.h"

#include <algorithm>

#include "allocators/registry.h"
#include "sim/capacity.h"
#include "sim/hinted_device.h"
#include "sim/replay.h"
#include "sim/tracking_device.h"

namespace fraglab {

std::optional<PoolMisplacement> find_pool_misplacement(const Trace& trace) {
  if (trace.meta.format != "pytorch-snapshot" || trace.meta.history_absent) return std::nullopt;
  SimDeviceConfig config;
  if (auto cap = infer_capacity(trace)) config.capacity = cap->bytes;
  HintedDevice hinted(trace.events, config, &trace.meta.initial);
  TrackingDevice device(hinted);
  auto policy = make_policy(PolicySpec::parse("pytorch"), device, trace.meta, &trace.events);
  ReplayOptions options;
  options.on_oom = OnOom::Stop;
  options.log_device_calls = true;
  ReplayEngine engine(*policy, device, options);
  engine.establish_initial_state(trace.meta.initial);
  uint64_t allocs = 0, empty_caches = 0;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    const size_t calls_before = device.call_log().size();
    if (!engine.apply(e, i)) return std::nullopt;  // out of memory: the state says no more about pools
    if (e.kind == EventKind::Alloc) {
      const LiveBlock& b = engine.blocks()[e.id];
      if (i >= trace.meta.initial.live_blocks && b.live && b.addr != e.addr)
        return PoolMisplacement{PoolMisplacement::Kind::Block, allocs, b.addr};
      ++allocs;
    } else if (e.kind == EventKind::EmptyCache && e.id == 0) {
      // The releases the recording made right after it (the importer put the event before them).
      std::vector<Addr> recorded;
      for (uint64_t j = i + 1; j < trace.events.size(); ++j) {
        EventKind k = trace.events[j].kind;
        if (k == EventKind::SegmentFree || k == EventKind::SegmentUnmap) recorded.push_back(trace.events[j].addr);
        else if (k != EventKind::PoolRelease && k != EventKind::EmptyCache) break;
      }
      const auto& log = device.call_log();
      for (size_t c = calls_before; c < log.size(); ++c)
        if (std::find(recorded.begin(), recorded.end(), log[c].addr) == recorded.end())
          return PoolMisplacement{PoolMisplacement::Kind::KeptSegment, empty_caches, log[c].addr};
      ++empty_caches;
    }
  }
  return std::nullopt;
}

void install_pool_checker() { set_pool_checker(find_pool_misplacement); }

}  // namespace fraglab
