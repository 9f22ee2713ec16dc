// The engine measures fragmentation at the reserved peak from a copy of the state taken at
// each new peak (sim/replay.cpp, remember_peak): it must equal measuring the whole block
// table right there, as the engine did before, for every policy on every bundled trace.
#include <catch2/catch.hpp>
#include <filesystem>

#include "allocators/registry.h"
#include "sim/replay.h"
#include "traces/trace_io.h"

namespace fraglab {
namespace {

// Replays `trace` event by event and measures directly (measure_fragmentation over every
// id slot) after each event that raises the reserved peak; returns the engine's result.
ReplayResult replay_checking_peak(const Trace& trace, const PolicyInfo& info, Fragmentation& direct) {
  SimDevice sim(SimDeviceConfig{});
  TrackingDevice device(sim);
  auto policy =
      make_policy(PolicySpec::parse(info.name), device, trace.meta, info.needs_whole_trace ? &trace.events : nullptr);
  ReplayOptions options;
  options.on_oom = OnOom::Skip;
  ReplayEngine engine(*policy, device, options);
  uint64_t peak = 0;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    if (!engine.apply(trace.events[i], i)) break;
    if (device.reserved_bytes() > peak) {
      peak = device.reserved_bytes();
      direct =
          device.aliases().empty() ? measure_fragmentation(device.physical(), engine.blocks(), i) : engine.measure(i);
    }
  }
  return engine.take_result();
}

}  // namespace

TEST_CASE("fragmentation at the reserved peak equals a direct measurement there", "[replay_peak]") {
  namespace fs = std::filesystem;
  const fs::path corpus = fs::path(FRAGLAB_SOURCE_DIR) / "traces" / "corpus";
  for (const char* name : {"bert_varlen_train.default.pickle.gz", "gpt2_train.default.pickle.gz",
                           "gpt2_train.expandable.pickle.gz", "side_stream_prefetch.default.pickle.gz"}) {
    Trace trace = load_trace((corpus / name).string());
    for (const auto& info : policy_registry()) {
      CAPTURE(name, info.name);
      Fragmentation direct;
      ReplayResult r = replay_checking_peak(trace, info, direct);
      CHECK(r.at_peak.event_index == direct.event_index);
      CHECK(r.at_peak.reserved == direct.reserved);
      CHECK(r.at_peak.allocated == direct.allocated);
      CHECK(r.at_peak.requested == direct.requested);
      CHECK(r.at_peak.free_bytes == direct.free_bytes);
      CHECK(r.at_peak.largest_free == direct.largest_free);
      CHECK(r.at_peak.free_ranges == direct.free_ranges);
    }
  }
}

}  // namespace fraglab
