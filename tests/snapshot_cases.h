// What the snapshot-case tests share (tests/import/): the recordings' folder and stats, the exact-replay
// check of a recording against PyTorch's counters, and small builders of events and segments.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "allocators/registry.h"
#include "import/trace_import.h"
#include "sim/capacity.h"
#include "sim/fidelity.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "tests/snapshot_stats.h"
#include "traces/trace.h"

namespace fraglab::test {

inline const std::string kCases = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots";

inline std::map<std::string, nlohmann::json> case_stats() { return test::snapshot_stats(kCases); }

// `fraglab replay --policy pytorch` (the simulated driver's addresses) under `capacity`: its reserved peak.
inline uint64_t plain_replay_peak(const Trace& trace, std::optional<uint64_t> capacity) {
  SimDeviceConfig config;
  config.capacity = capacity;
  MemorySource source(trace);
  ReplayOptions options;
  options.oracle_bound = false;
  options.on_oom = OnOom::Skip;
  return replay_simulated(source, PolicySpec::parse("pytorch"), config, options, &trace.events).reserved.bytes;
}

inline void check_exact(const std::string& file, const nlohmann::json& stats) {
  INFO("trace " << file);
  Trace trace = load_trace(kCases + "/" + file);
  FidelityOptions options;
  // The job's memory fraction where it set one, else the limit the recording shows (the GPU's own, say).
  options.capacity = stats["capacity_bytes"].is_number()
                         ? std::optional<uint64_t>(stats["capacity_bytes"].get<uint64_t>())
                         : capacity_for(trace, std::nullopt);
  FidelityResult r = check_fidelity(trace, options);
  std::string context;
  for (const auto& l : r.context) context += l + "\n";
  INFO("divergence at event " << r.event_index << ": " << r.what << "\n" << context);
  CHECK(r.exact);
  CHECK(r.ooms == stats["trace_ooms"].get<uint64_t>());
  const uint64_t peak = stats["stats"]["reserved_bytes.all.peak"].get<uint64_t>();
  CHECK(r.simulated_peak == r.recorded_peak);
  CHECK(recorded_peak(trace) == r.recorded_peak);
  // A wrapped ring may have dropped the entries of PyTorch's peak (bert_varlen_oom's ring8000 reached
  // it before its last 8,000 entries): then no replay of the window can show it.
  const bool wrapped = stats.contains("max_entries") && stats["max_entries"].is_number() &&
                       stats["trace_entries"] == stats["max_entries"];
  if (wrapped)
    CHECK(r.recorded_peak <= peak);
  else
    CHECK(r.recorded_peak == peak);
  // (A recording from the process's start may leave at_record_start out.)
  if (stats.contains("at_record_start") && stats["at_record_start"].is_object() && stats["record"] != "start" &&
      stats["record"] != "state") {
    // Recording began late: the state at the first entry is what PyTorch held then.
    CHECK(trace.meta.initial.reserved() == stats["at_record_start"]["reserved_bytes.all.current"].get<uint64_t>());
    // Blocks were live then exactly when PyTorch had bytes allocated (mempool_oom_fallback's late start
    // comes after the reserve was freed: its segments are all cached).
    CHECK((trace.meta.initial.live_blocks > 0) ==
          (stats["at_record_start"]["allocated_bytes.all.current"].get<uint64_t>() > 0));
  }
}

// check_exact for each file, and plain replay (the model's own addresses, the capacity inferred) reaching
// the recorded peak.
inline void check_cases(std::initializer_list<const char*> files) {
  auto stats = case_stats();
  for (const char* file : files) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
    Trace trace = load_trace(kCases + "/" + file);
    INFO("plain replay of " << file);
    CHECK(plain_replay_peak(trace, capacity_for(trace, std::nullopt)) == recorded_peak(trace));
  }
}

inline constexpr uint64_t MiB = 1ull << 20;
inline Event entry(EventKind k, Addr a, uint64_t size, StreamIndex stream = 0) {
  Event e;
  e.kind = k;
  e.addr = a;
  e.size = size;
  e.stream = stream;
  return e;
}
inline RecordedSegment segment(Addr a, uint64_t size, bool expandable = false) {
  RecordedSegment s;
  s.address = a;
  s.total_size = size;
  s.is_expandable = expandable;
  return s;
}

inline size_t count_kind(const Trace& t, EventKind kind) {
  return static_cast<size_t>(
      std::count_if(t.events.begin(), t.events.end(), [&](const Event& e) { return e.kind == kind; }));
}

inline bool has_pool(const Trace& t, std::array<int64_t, 2> id) {
  return std::any_of(t.meta.pools.begin(), t.meta.pools.end(), [&](const PoolInfo& p) { return p.id == id; });
}

}  // namespace fraglab::test
