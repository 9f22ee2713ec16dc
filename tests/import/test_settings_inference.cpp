// Settings a snapshot does not record or that changed mid-run (traces/formats/pytorch/settings_inference.h,
// unrecorded_settings.h): read from the recording's device calls and the model's replays.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "allocators/pytorch/caching_allocator.h"
#include "allocators/pytorch/limit_drift.h"
#include "allocators/registry.h"
#include "import/trace_import.h"
#include "report/diagnose.h"
#include "sim/capacity.h"
#include "sim/fidelity.h"
#include "sim/pool_checker.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "tests/snapshot_cases.h"
#include "tests/snapshot_stats.h"
#include "tests/tune_setting.h"
#include "traces/formats/pytorch/initial_state.h"
#include "traces/formats/pytorch/pool_inference.h"
#include "traces/formats/pytorch/settings_inference.h"
#include "traces/io/format_error.h"
#include "traces/state_json.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

using namespace fraglab;
using namespace fraglab::test;

TEST_CASE("snapshot cases: expandable segments turned off and on mid-run replay exactly",
          "[snapshot_cases][settings]") {
  check_cases({"sleep_mode_pools.expandable.pickle.gz", "sleep_mode_pools.expandable_plainpool.pickle.gz",
               "sleep_mode_pools.expandable_defaultinwindow.pickle.gz", "sleep_mode_pools.expandable_late1.pickle.gz",
               "sleep_mode_pools.expandable_keptpools.pickle.gz",
               "sleep_mode_pools.expandable_plainpool_defaultinwindow_ring400.pickle.gz",
               "varlen_transformer_train.default_set3-exp.pickle.gz",
               "varlen_transformer_train.expandable_set2-noexp_set5-exp.pickle.gz",
               "varlen_transformer_train.expandable_set3-noexp.pickle.gz",
               "varlen_transformer_train.default_late2_set1-exp.pickle.gz",
               "varlen_transformer_train.expandable_ring4000_set2-noexp_set5-exp.pickle.gz",
               "varlen_transformer_train.default_cap0.08_set3-exp.pickle.gz",
               "varlen_transformer_train.expandable_cap0.08_set2-noexp_set6-exp.pickle.gz"});
  // Turned on after step 3 and no mapping made after: the whole history ran with it off.
  Trace on_late = load_trace(kCases + "/varlen_transformer_train.default_set3-exp.pickle.gz");
  CHECK(on_late.meta.expandable_flipped == std::vector<std::pair<uint64_t, uint64_t>>{{0, UINT64_MAX}});
  // Off after step 2, on after step 5: off from its first cudaMalloc; no mapping after it, and the model
  // replays the rest alike either way, so the window runs to the end.
  Trace toggled = load_trace(kCases + "/varlen_transformer_train.expandable_set2-noexp_set5-exp.pickle.gz");
  REQUIRE(toggled.meta.expandable_flipped.size() == 1);
  CHECK(toggled.meta.expandable_flipped[0].first > 0);
  // Off after step 2, on after step 6, OOMs under fraction 0.08: a small request the setting on served
  // from an expandable page (off, the model made a cudaMalloc) moved the change back inside the history.
  Trace oomed = load_trace(kCases + "/varlen_transformer_train.expandable_cap0.08_set2-noexp_set6-exp.pickle.gz");
  REQUIRE(oomed.meta.expandable_flipped.size() == 1);
  CHECK(oomed.meta.expandable_flipped[0].first > 0);
  CHECK(oomed.meta.expandable_flipped[0].second < UINT64_MAX);
  // A what-if names the setting: the program's changes are not replayed then.
  FidelityOptions what_if;
  what_if.policy = "pytorch:expandable_segments=True";
  const FidelityResult r = check_fidelity(on_late, what_if);
  CHECK_FALSE(r.exact);
  CHECK(r.event_index == 0);
  // A snapshot without recorded settings (written before PyTorch recorded them, or stripped) from a run with
  // expandable segments: the mappings say so. Replayed with PyTorch's default, these diverged at entry 0.
  const std::initializer_list<const char*> no_settings = {"graph_mlp_train.expandable_nosettings.pickle.gz",
                                                          "mempool_side.expandable_nosettings.pickle.gz",
                                                          "side_stream_prefetch.expandable_nosettings.pickle.gz"};
  check_cases(no_settings);
  for (const char* file : no_settings) {
    Trace trace = load_trace(kCases + "/" + file);
    CHECK(trace.meta.allocator_settings.empty());
    CHECK(trace.meta.expandable_flipped == std::vector<std::pair<uint64_t, uint64_t>>{{0, UINT64_MAX}});
  }
  // A MemPool with an allocator of its own under the setting is not read as the setting turned off.
  Trace own = load_trace(kCases + "/mempool_allocator.expandable.pickle.gz");
  CHECK(own.meta.expandable_flipped.empty());
  CHECK(std::any_of(own.meta.pools.begin(), own.meta.pools.end(), [](const PoolInfo& p) { return p.own_allocator; }));
}

// The windows from the device calls alone (no model installed to revise them).
// Snapshots that record no settings (PyTorch 2.0's) from jobs run with max_split_size_mb, rounding or the
// collector: under PyTorch's defaults these diverged (at entries 1933, 2, 2023 and 15561); the importer
// reads the settings from how the recording allocator behaved (traces/formats/pytorch/unrecorded_settings.h). The first
// needs two together (neither alone moves the model further).
TEST_CASE("snapshot cases: settings a snapshot does not record are read from the recording",
          "[snapshot_cases][settings]") {
  const std::pair<const char*, const char*> cases[] = {
      {"gpt2_oom_backoff.garbage_collection_threshold-0.5_max_split_size_mb-64_cap0.12_late1_nosettings.pickle.gz",
       "max_split_size_mb:64,garbage_collection_threshold:0.5"},
      {"gpt2_oom_backoff.expandable_segments-True_roundup_power2_divisions-4_cap0.12_nosettings.pickle.gz",
       "roundup_power2_divisions:4"},
      {"resnet50_train.garbage_collection_threshold-0.6_cap0.115_nosettings.pickle.gz",
       "garbage_collection_threshold:0.6"},
      // Under the GPU's own limit (no fraction) the collector never runs: only max_split_size_mb shows.
      {"batch_search.garbage_collection_threshold-0.6_max_split_size_mb-128_left8_nosettings.pickle.gz",
       "max_split_size_mb:128"}};
  for (const auto& [file, conf] : cases) {
    INFO(file);
    check_cases({file});
    const Trace trace = load_trace(kCases + "/" + file);
    CHECK(trace.meta.settings_inferred);
    CHECK(trace.meta.allocator_settings.at("PYTORCH_CUDA_ALLOC_CONF") == conf);
  }
  // The recording with its settings is read as recorded; one that replays under the defaults infers nothing.
  const Trace recorded = load_trace(
      kCases + "/gpt2_oom_backoff.garbage_collection_threshold-0.5_max_split_size_mb-64_cap0.12_late1.pickle.gz");
  CHECK_FALSE(recorded.meta.settings_inferred);
  const Trace plain = load_trace(kCases + "/graph_mlp_train.default_nosettings.pickle.gz");
  CHECK_FALSE(plain.meta.settings_inferred);
  CHECK(plain.meta.allocator_settings.empty());
  // Kept by convert: a converted trace replays under the same settings without searching again.
  const Trace inferred = load_trace(kCases + "/" + cases[0].first);
  const std::string dir = std::filesystem::temp_directory_path() / ("fraglab_inferred_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* ext : {".fltrace", ".jsonl"}) {
    const std::string path = dir + "/t" + ext;
    save_trace(inferred, path);
    const Trace back = load_trace(path);
    CHECK(back.meta.settings_inferred);
    CHECK(back.meta.allocator_settings == inferred.meta.allocator_settings);
  }
  std::filesystem::remove_all(dir);
}

// Settings PyTorch 2.11 reads from PYTORCH_ALLOC_CONF that fraglab refused before ("Unrecognized
// CachingAllocator option"): large_segment_size_mb (the segment of a 1-10 MiB request and an expandable
// large pool's page), per_process_memory_fraction (a limit from the settings text, read from the OOMs
// like set_per_process_memory_fraction's), graph_capture_record_stream_reuse.
TEST_CASE("snapshot cases: PyTorch 2.11's newer settings replay exactly", "[snapshot_cases][settings]") {
  check_cases({"gpt2_train.large_segment_size_mb-40.pickle.gz",
               "gpt2_train.large_segment_size_mb-64_expandable_segments-True.pickle.gz",
               "gpt2_oom_backoff.large_segment_size_mb-40_cap0.12.pickle.gz",
               "gpt2_oom_backoff.per_process_memory_fraction-0.12.pickle.gz",
               "gpt2_oom_backoff.per_process_memory_fraction-0.12_expandable_segments-True_late1.pickle.gz",
               "bert_varlen_train.expandable_segments-True_large_segment_size_mb-12_ring30000.pickle.gz",
               "resnet50_train.large_segment_size_mb-32_max_split_size_mb-64.pickle.gz",
               "graph_side_capture.graph_capture_record_stream_reuse-True.pickle.gz",
               "graphed_amp_train.graph_capture_record_stream_reuse-True.pickle.gz"});
  check_cases({"mempool_side.large_segment_size_mb-40_expandable_segments-True.pickle.gz",
               "mempool_oom_fallback.large_segment_size_mb-40_cap0.02.pickle.gz",
               "graph_mlp_train.large_segment_size_mb-32.pickle.gz",
               "compile_reduce_overhead.per_process_memory_fraction-0.5.pickle.gz",
               "side_stream_prefetch.large_segment_size_mb-40_ring1000.pickle.gz",
               "many_streams_raw.large_segment_size_mb-40_cap0.1.pickle.gz",
               "observer_oom_mlp.large_segment_size_mb-40_cap0.07_atoom.pickle.gz",
               "amp_accum_prefetch.large_segment_size_mb-24_late2.pickle.gz",
               "llama_generate.large_segment_size_mb-16_ring3000.pickle.gz",
               "unet_like.roundup_power2_divisions-64-4_256-2_gt-8_cap0.1.pickle.gz",
               "gpt2_oom_backoff.large_segment_size_mb-100_expandable_segments-True_left9.6.pickle.gz"});
  // Expandable segments with large pages of 32 to 64 MiB (group probe7): mapped, unmapped by empty_cache()
  // and by malloc's recovery, under a fraction, in rings, with CUDA graphs and a MemPool's own allocator.
  check_cases({"mempool_allocator.large_segment_size_mb-40_expandable_segments-True.pickle.gz",
               "graph_mlp_train.expandable_segments-True_large_segment_size_mb-40.pickle.gz",
               "observer_oom_mlp.expandable_segments-True_large_segment_size_mb-40_cap0.07_atoom.pickle.gz",
               "infer_server.expandable_segments-True_large_segment_size_mb-40_cap0.04_ring4000.pickle.gz",
               "prefetch_pressure.expandable_segments-True_large_segment_size_mb-48_cap0.05.pickle.gz",
               "bert_varlen_oom.expandable_segments-True_large_segment_size_mb-32_cap0.16_ring8000.pickle.gz",
               "gpt2_oom_backoff.expandable_segments-True_large_segment_size_mb-64_cap0.12.pickle.gz",
               "llama_train_ckpt.expandable_segments-True_large_segment_size_mb-40_late2_empty3.pickle.gz",
               "gpt2_train.expandable_segments-True_large_segment_size_mb-40_empty2.pickle.gz"});
  // A MemPool(use_on_oom) reserve under expandable segments, all gone by the end: the first reading put
  // the reserve in the default pools and the requests in a pool of their own, and the model served the
  // recorded OOM from the reserve's cached block; such a block's segment is now moved out of the request's
  // pool (PoolMisplacement::ServedOom), and the reading is the program's (diverged at entry 46 before).
  check_cases({"mempool_oom_fallback.expandable_segments-True_large_segment_size_mb-40_cap0.02.pickle.gz"});
  const Trace fallback =
      load_trace(kCases + "/mempool_oom_fallback.expandable_segments-True_large_segment_size_mb-40_cap0.02.pickle.gz");
  REQUIRE(fallback.meta.pools.size() == 2);
  size_t in_pool = 0;
  for (const Event& e : fallback.events) in_pool += e.kind == EventKind::Alloc && e.pool == 1;
  CHECK(in_pool == 3);  // the reserve: 384 MiB, 96 MiB and 600,000 bytes
  // vLLM's sleep mode: its _set_allocator_settings replaced the text that set 40 MiB, which PyTorch keeps;
  // the cudaMallocs for 1-8 MiB requests show it (diverged at the 4th request before).
  check_cases({"sleep_mode_pools.large_segment_size_mb-40_expandable_segments-True.pickle.gz"});
  const Trace sleep =
      load_trace(kCases + "/sleep_mode_pools.large_segment_size_mb-40_expandable_segments-True.pickle.gz");
  CHECK(sleep.meta.allocator_settings.at("PYTORCH_CUDA_ALLOC_CONF") == "expandable_segments:True");
  CHECK(recorded_large_segment_size(sleep.meta) == 40ull << 20);
  // Where the text names the size, nothing is noted.
  CHECK_FALSE(load_trace(kCases + "/gpt2_train.large_segment_size_mb-40.pickle.gz")
                  .meta.allocator_settings.contains("large_segment_size"));
  // 40 MiB segments for the 1-10 MiB requests, as the recording made them.
  const Trace t = load_trace(kCases + "/gpt2_train.large_segment_size_mb-40.pickle.gz");
  CHECK(recorded_large_segment_size(t.meta) == 40ull << 20);
  bool forty = false;
  for (const Event& e : t.events) forty = forty || (e.kind == EventKind::SegmentAlloc && e.size == 40ull << 20);
  CHECK(forty);
}

TEST_CASE("settings inference: a mapping shows the setting on, a cudaMalloc off", "[settings]") {
  const SnapshotModel rules_alone;  // the device calls alone place the windows
  Trace t;
  t.meta.allocator_settings = {{"expandable_segments", "True"}};
  t.events = {entry(EventKind::SegmentMap, 0, 2 * MiB),
              entry(EventKind::Alloc, 0, 512),  // #0 on
              entry(EventKind::Free, 0, 512),
              entry(EventKind::SegmentAlloc, 0, 2 * MiB),
              entry(EventKind::Alloc, 0, 512),  // #1 off
              entry(EventKind::Alloc, 0, 512),  // #2 shows nothing
              entry(EventKind::SegmentAlloc, 0, 2 * MiB),
              entry(EventKind::Alloc, 0, 512),  // #3 off
              entry(EventKind::SegmentMap, 0, 2 * MiB),
              entry(EventKind::Alloc, 0, 512)};  // #4 on
  infer_expandable_switches(t, rules_alone);
  CHECK(t.meta.expandable_flipped == std::vector<std::pair<uint64_t, uint64_t>>{{1, 4}});
  // As event positions: from the entry after Alloc #0 to Alloc #3's.
  CHECK(flipped_event_ranges(t.events, t.meta.expandable_flipped) ==
        std::vector<std::pair<uint64_t, uint64_t>>{{2, 8}});
  // Recorded off: the mappings are the other setting; before the first call, the first call's held.
  t.meta.allocator_settings = {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64"}};
  infer_expandable_switches(t, rules_alone);
  CHECK(t.meta.expandable_flipped == std::vector<std::pair<uint64_t, uint64_t>>{{0, 1}, {4, UINT64_MAX}});
  // The same setting throughout: nothing.
  t.meta.allocator_settings = {{"expandable_segments", "True"}};
  t.events = {entry(EventKind::SegmentMap, 0, 2 * MiB), entry(EventKind::Alloc, 0, 512)};
  infer_expandable_switches(t, rules_alone);
  CHECK(t.meta.expandable_flipped.empty());
}

TEST_CASE("settings inference: the windows survive convert, and bad ones are refused", "[settings][formats]") {
  Trace trace = load_trace(kCases + "/varlen_transformer_train.expandable_set2-noexp_set5-exp.pickle.gz");
  REQUIRE_FALSE(trace.meta.expandable_flipped.empty());
  const std::string dir = std::filesystem::temp_directory_path() / ("fraglab_flips_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* ext : {".fltrace", ".jsonl"}) {
    const std::string path = dir + "/t" + ext;
    save_trace(trace, path);
    CHECK(load_trace(path).meta.expandable_flipped == trace.meta.expandable_flipped);
  }
  CHECK_THROWS_WITH(ranges_from_json(nlohmann::json::parse("[[5, 3]]")), Catch::Contains("non-empty"));
  CHECK_THROWS_WITH(ranges_from_json(nlohmann::json::parse("[[1, 4], [2, 9]]")), Catch::Contains("disjoint"));
  CHECK_THROWS_WITH(ranges_from_json(nlohmann::json::parse("[[1, -4]]")), Catch::Contains("non-negative"));
  std::filesystem::remove_all(dir);
}

// An upward batch-size search (accelerate's find_executable_batch_size) with the GPU itself running out
// (all but 8 GiB taken first), the collector and max_split_size_mb set: after the two OOMs, malloc's
// recoveries were refused a segment the limit the OOMs showed (reserved + free memory) had room for, as
// the driver's own memory grew. Under the OOMs' one limit the model made those segments (diverged at entry
// 26,813 of 27,987); the limit is now followed along the trace (detail::limit_drift). ViT-B/16 and
// the search's other readings beside it.
