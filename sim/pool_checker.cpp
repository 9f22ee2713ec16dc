#include "sim/pool_checker.h"

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
  ReplayEngine engine(*policy, device, options);
  engine.establish_initial_state(trace.meta.initial);
  uint64_t ordinal = 0;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (!engine.apply(e, i)) return std::nullopt;  // out of memory: the state says no more about pools
    if (e.kind != EventKind::Alloc) continue;
    const LiveBlock& b = engine.blocks()[e.id];
    if (i >= trace.meta.initial.live_blocks && b.live && b.addr != e.addr) return PoolMisplacement{ordinal, b.addr};
    ++ordinal;
  }
  return std::nullopt;
}

void install_pool_checker() { set_pool_checker(find_pool_misplacement); }

}  // namespace fraglab
