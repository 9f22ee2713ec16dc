// The engine measures fragmentation at the reserved peak from a copy of the state taken at
// each new peak (sim/replay.cpp, remember_peak): it must equal measuring the whole block
// table right there, as the engine did before, for every policy on every bundled trace.
#include <catch2/catch.hpp>
#include <filesystem>

#include "allocators/registry.h"
#include "import/trace_import.h"
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

// The engine's state at the peak equals the direct measurement (requested apart: see the callers).
void check_same_peak_state(const ReplayResult& r, const Fragmentation& direct) {
  CHECK(r.at_peak.event_index == direct.event_index);
  CHECK(r.at_peak.reserved == direct.reserved);
  CHECK(r.at_peak.allocated == direct.allocated);
  CHECK(r.at_peak.free_bytes == direct.free_bytes);
  CHECK(r.at_peak.largest_free == direct.largest_free);
  CHECK(r.at_peak.free_ranges == direct.free_ranges);
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
      check_same_peak_state(r, direct);
      CHECK(r.at_peak.requested == direct.requested);
    }
  }
}

}  // namespace fraglab

namespace fraglab {

// The state at a peak is rebuilt from journals (the live blocks', the device's ranges): here the peak
// comes early and long runs of frees, reuses and new segments follow, so the journals outgrow the state
// and are built part-way, and the result is taken long after.
TEST_CASE("the peak's state rebuilt from journals equals a direct measurement", "[replay_peak]") {
  for (int pattern = 0; pattern < 3; ++pattern) {
    Trace trace;
    AllocId next = 0;
    std::vector<AllocId> live;
    auto alloc = [&](uint64_t size) {
      Event e;
      e.kind = EventKind::Alloc;
      e.id = next++;
      e.size = size;
      trace.events.push_back(e);
      live.push_back(e.id);
    };
    auto free_at = [&](size_t k) {
      Event e;
      e.kind = EventKind::Free;
      e.id = live[k];
      trace.events.push_back(e);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    };
    for (int i = 0; i < 3000; ++i)
      alloc(static_cast<uint64_t>(1 + i % 7) << (pattern == 0 ? 20 : 12));  // the peak grows
    for (int round = 0; round < 4; ++round) {  // then churn below it: frees, reuses, a few new sizes
      for (size_t k = 0; k < live.size(); k += 3) free_at(k);
      for (int i = 0; i < 800; ++i) alloc(static_cast<uint64_t>(1 + (i * 5 + round) % 11) << (pattern == 2 ? 21 : 12));
    }
    for (const char* policy : {"passthrough", "bestfit", "pytorch", "firstfit"}) {
      CAPTURE(pattern, policy);
      const PolicyInfo* info = find_policy(policy);
      REQUIRE(info);
      Fragmentation direct;
      ReplayResult r = replay_checking_peak(trace, *info, direct);
      check_same_peak_state(r, direct);
    }
  }
}

}  // namespace fraglab
