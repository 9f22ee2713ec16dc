// Replay throughput: events per second of every registered policy on every bench trace,
// trace already in memory (loading is measured by bench_formats). Targets
// (docs/performance.md): pytorch and bestfit >= 20M events/s, every policy >= 5M.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

#include "allocators/offline_plan.h"
#include "allocators/registry.h"
#include "bench/bench_common.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"

namespace fraglab::bench {
namespace {

void replay_once(benchmark::State& state, const BenchTrace& bt, const PolicySpec& spec) {
  const std::vector<Event>* whole = &bt.trace.events;
  uint64_t events = 0, peak = 0;
  for (auto _ : state) {
    MemorySource source(bt.trace);
    ReplayOptions options;
    options.on_oom = OnOom::Skip;
    // The trace's bounds (live bytes, oracle plan) are a property of the trace, not replay
    // work: given empty, replay_simulated does not plan the oracle inside the timed loop.
    options.bounds = TraceBounds{};
    ReplayResult r = replay_simulated(source, spec, SimDeviceConfig{}, options, whole);
    events += r.events;
    peak = r.reserved.bytes;
    benchmark::DoNotOptimize(peak);
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["peak_reserved_GB"] = static_cast<double>(peak) / 1e9;
}

// The oracle's offline plan (greedy by size over every lifetime), which replay/oracle/* reuses
// from the plan cache after its first iteration: planning is per trace, like loading it.
void plan_once(benchmark::State& state, const BenchTrace& bt) {
  uint64_t peak = 0;
  for (auto _ : state) {
    peak = detail::plan_greedy_by_size(bt.trace.events, 512).peak;
    benchmark::DoNotOptimize(peak);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * bt.trace.events.size()));
  state.counters["peak_GB"] = static_cast<double>(peak) / 1e9;
}

// N allocations never freed, each needing a segment of its own (2 MiB and more, all live): every one
// sets a new reserved peak. The engine once copied the state at each (quadratic: 100k took 8.6 s, 300k
// more than 120 s); it journals the changes since the peak instead (issue 40).
const BenchTrace& never_freed(size_t n) {
  static std::vector<std::unique_ptr<BenchTrace>> made;
  for (const auto& t : made)
    if (t->trace.events.size() == n) return *t;
  auto t = std::make_unique<BenchTrace>();
  t->name = "never_freed_" + std::to_string(n / 1000) + "k";
  for (size_t i = 0; i < n; ++i) {
    Event e;
    e.kind = EventKind::Alloc;
    e.id = static_cast<AllocId>(i);
    e.size = (uint64_t{2} << 20) + (i % 1000) * 512;
    t->trace.events.push_back(e);
  }
  made.push_back(std::move(t));
  return *made.back();
}

[[maybe_unused]] const bool registered = [] {
  for (size_t n : {size_t{100000}, size_t{300000}})
    for (const char* policy : {"passthrough", "bestfit", "pytorch"}) {
      if (smoke_mode() && n > 100000) continue;
      const std::string name = "replay/" + std::string(policy) + "/never_freed_" + std::to_string(n / 1000) + "k";
      benchmark::RegisterBenchmark(name.c_str(), [n, spec = PolicySpec::parse(policy)](
                                                     benchmark::State& s) { replay_once(s, never_freed(n), spec); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  for (size_t i = 0; i < bench_trace_paths().size(); ++i) {
    const std::string name = "plan/oracle/" + std::string(std::filesystem::path(bench_trace_paths()[i]).filename());
    benchmark::RegisterBenchmark(name.c_str(), [i](benchmark::State& s) { plan_once(s, bench_traces()[i]); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (const auto& info : policy_registry()) {
    for (size_t i = 0; i < bench_trace_paths().size(); ++i) {
      const std::string name =
          "replay/" + info.name + "/" + std::string(std::filesystem::path(bench_trace_paths()[i]).filename());
      benchmark::RegisterBenchmark(name.c_str(), [i, spec = PolicySpec::parse(info.name)](
                                                     benchmark::State& s) { replay_once(s, bench_traces()[i], spec); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
}  // namespace fraglab::bench
