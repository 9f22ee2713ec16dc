// Which pool each request of a snapshot went to (traces/formats/pytorch/pool_inference.h): CUDA graphs,
// torch.compile and MemPools, the rules and the model's revisions, on recordings and on built traces.
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

TEST_CASE("snapshot cases: CUDA graphs, torch.compile and MemPools replay exactly with their private pools",
          "[snapshot_cases][pools]") {
  auto stats = case_stats();
  for (const char* file : {"graph_mlp_train.default.pickle.gz", "graph_mlp_train.expandable.pickle.gz",
                           "compile_reduce_overhead.default.pickle.gz", "mempool_side.default.pickle.gz",
                           "mempool_side.expandable.pickle.gz", "graph_shared_pool.default.pickle.gz",
                           "graph_shared_pool.expandable.pickle.gz", "graphs_two_pools.default.pickle.gz",
                           "graphs_two_pools.expandable.pickle.gz", "graphed_callables_train.default.pickle.gz",
                           "graphed_callables_train.expandable.pickle.gz", "mempool_kept.default.pickle.gz",
                           "mempool_kept.expandable.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
  }
}

// torch.compile(mode="reduce-overhead") training (group `graphtrees`): CUDA graph trees record forward and
// backward graphs per shape in one private pool, evaluation forwards between steps and a graph output kept
// across steps start other paths of the tree; from the start, expandable, begun late, a 400-entry ring.
TEST_CASE("snapshot cases: torch.compile reduce-overhead training replays exactly", "[snapshot_cases][pools]") {
  auto stats = case_stats();
  for (const char* file :
       {"compile_graph_trees_train.default.pickle.gz", "compile_graph_trees_train.expandable.pickle.gz",
        "compile_graph_trees_train.default_late3.pickle.gz", "compile_graph_trees_train.expandable_late4.pickle.gz",
        "compile_graph_trees_train.default_ring400.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
  }
}

TEST_CASE("pool inference: graph captures go to the capture's pool, which is released before the last empty_cache",
          "[snapshot_cases][pools]") {
  Trace t = load_trace(kCases + "/graph_mlp_train.default.pickle.gz");
  REQUIRE(has_pool(t, {1, 0}));
  // 28 allocations on the capture stream; all but the generator's two 8-byte seed/offset tensors, made
  // before the capture began, went to the graph's pool.
  size_t in_pool = 0, small_default_on_capture_stream = 0;
  for (const Event& e : t.events) {
    if (e.kind != EventKind::Alloc || t.meta.streams[e.stream] != 1014704544) continue;
    if (e.pool)
      ++in_pool;
    else if (e.size == 8)
      ++small_default_on_capture_stream;
  }
  CHECK(in_pool == 26);
  CHECK(small_default_on_capture_stream == 2);
  CHECK(count_kind(t, EventKind::PoolRelease) == 1);  // `del g`: releasePool before the final empty_cache
  // torch.cuda.graph() empties the cache before capturing, though a new segment follows.
  CHECK(count_kind(t, EventKind::EmptyCache) == 2);
}

TEST_CASE("pool inference: a MemPool alive across empty_cache keeps its segments, so the model tells it apart",
          "[snapshot_cases][pools]") {
  Trace t = load_trace(kCases + "/mempool_kept.default.pickle.gz");
  CHECK(t.meta.pools.size() >= 2);  // nothing in the snapshot names it: the empty_cache that kept its segments does
  CHECK(std::any_of(t.events.begin(), t.events.end(),
                    [](const Event& e) { return e.kind == EventKind::Alloc && e.pool; }));
}

TEST_CASE("pool inference: a MemPool on the default stream is told apart by the model", "[snapshot_cases][pools]") {
  Trace t = load_trace(kCases + "/mempool_side.default.pickle.gz");
  CHECK(t.meta.pools.size() >= 2);  // the segments are all gone by the end: inferred pools, id (-1, k)
  CHECK(count_kind(t, EventKind::PoolRelease) >= 1);
  CHECK(std::any_of(t.events.begin(), t.events.end(),
                    [](const Event& e) { return e.kind == EventKind::Alloc && e.pool; }));
}

// ---- MemPool(allocator=...), MemPool(use_on_oom=True), MemPool(no_split=True) (group mempoolvariants) ----

namespace {

const char* const kMempoolVariants[] = {
    "mempool_allocator.default.pickle.gz",
    "mempool_allocator.expandable.pickle.gz",
    "mempool_allocator.expandable_late1.pickle.gz",
    "mempool_allocator.expandable_keptpools.pickle.gz",
    "mempool_no_split.default.pickle.gz",
    "mempool_no_split.expandable.pickle.gz",
    "mempool_no_split.default_late1.pickle.gz",
    "mempool_no_split.default_keptpools.pickle.gz",
    "mempool_no_split.expandable_keptpools.pickle.gz",
    "mempool_oom_fallback.default_cap0.02.pickle.gz",
    "mempool_oom_fallback.expandable_cap0.02.pickle.gz",
    "mempool_oom_fallback.expandable_cap0.02_poolalloc.pickle.gz",
    "mempool_oom_fallback.default_cap0.02_late1.pickle.gz",
    "mempool_oom_fallback.garbage_collection_threshold-0.6_cap0.02.pickle.gz",
    "mempool_oom_fallback.default_left1.6.pickle.gz",
    "mempool_oom_fallback.default_cap0.02_poolalloc_keptpools.pickle.gz",
    "mempool_oom_fallback.expandable_cap0.02_poolalloc_keptpools_ring60.pickle.gz",
};

// The pools whose MemPool the history shows made with `trait`.
size_t pools_with(const Trace& t, bool PoolInfo::*trait) {
  return static_cast<size_t>(
      std::count_if(t.meta.pools.begin(), t.meta.pools.end(), [&](const PoolInfo& p) { return p.*trait; }));
}

}  // namespace

TEST_CASE("snapshot cases: MemPools with an allocator, use_on_oom or no_split replay exactly",
          "[snapshot_cases][pools][mempool]") {
  auto stats = case_stats();
  for (const char* file : kMempoolVariants) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
    // Plain replay (the model's own addresses, the capacity inferred) reaches the same peak.
    Trace t = load_trace(kCases + "/" + file);
    MemorySource src(t);
    SimDeviceConfig config;
    config.capacity = stats[file]["capacity_bytes"].is_number()
                          ? std::optional<uint64_t>(stats[file]["capacity_bytes"].get<uint64_t>())
                          : capacity_for(t, std::nullopt);
    ReplayResult r = replay_simulated(src, PolicySpec::parse("pytorch"), config, ReplayOptions{}, &t.events);
    INFO("trace " << file);
    CHECK(r.reserved.bytes == recorded_peak(t));
  }
}

TEST_CASE("pool inference: a MemPool with its own allocator under expandable segments",
          "[snapshot_cases][pools][mempool]") {
  // Its segments are cudaMalloc-style (segment_alloc) while the default pools map pages.
  Trace gone = load_trace(kCases + "/mempool_allocator.expandable.pickle.gz");
  CHECK(pools_with(gone, &PoolInfo::own_allocator) == 1);  // both MemPools' segments are gone: one inferred pool
  Trace kept = load_trace(kCases + "/mempool_allocator.expandable_keptpools.pickle.gz");
  CHECK(pools_with(kept, &PoolInfo::own_allocator) == 2);  // (0, 1) and (0, 2), named by the final segments
  CHECK(has_pool(kept, {0, 1}));
  CHECK(has_pool(kept, {0, 2}));
  // Without expandable segments nothing tells a MemPool's allocator from cudaMalloc.
  Trace plain = load_trace(kCases + "/mempool_allocator.default.pickle.gz");
  CHECK(pools_with(plain, &PoolInfo::own_allocator) == 0);
}

TEST_CASE("pool inference: a no_split MemPool", "[snapshot_cases][pools][mempool]") {
  for (const char* file : {"mempool_no_split.default.pickle.gz", "mempool_no_split.expandable.pickle.gz",
                           "mempool_no_split.default_late1.pickle.gz", "mempool_no_split.default_keptpools.pickle.gz",
                           "mempool_no_split.expandable_keptpools.pickle.gz"}) {
    INFO("trace " << file);
    Trace t = load_trace(kCases + "/" + file);
    CHECK(pools_with(t, &PoolInfo::no_split) == 1);
  }
  Trace kept = load_trace(kCases + "/mempool_no_split.default_keptpools.pickle.gz");
  CHECK(kept.meta.pools[1].id == std::array<int64_t, 2>{0, 1});
  CHECK(kept.meta.pools[1].no_split);
}

TEST_CASE("pool inference: requests a use_on_oom MemPool served at the limit are the default pools'",
          "[snapshot_cases][pools][mempool]") {
  // 17 requests of 64 MiB got segments up to the memory fraction; the next 7 took the overflow pool's
  // cached blocks (try_mempool_fallback) and the 8th ran out. The pool's own requests are the 3 made
  // inside use_mem_pool.
  for (const char* file : {"mempool_oom_fallback.default_cap0.02.pickle.gz",
                           "mempool_oom_fallback.garbage_collection_threshold-0.6_cap0.02.pickle.gz",
                           "mempool_oom_fallback.expandable_cap0.02_poolalloc.pickle.gz",
                           "mempool_oom_fallback.default_cap0.02_poolalloc_keptpools.pickle.gz"}) {
    INFO("trace " << file);
    Trace t = load_trace(kCases + "/" + file);
    REQUIRE(pools_with(t, &PoolInfo::use_on_oom) == 1);
    size_t in_pool = 0;
    for (const Event& e : t.events) in_pool += e.kind == EventKind::Alloc && e.pool != 0;
    CHECK(in_pool == 3);
  }
  // Under expandable segments a plain MemPool's blocks are expandable, which the fallback skips: nothing
  // fell back, so nothing says the pool opted in.
  Trace expandable = load_trace(kCases + "/mempool_oom_fallback.expandable_cap0.02.pickle.gz");
  CHECK(pools_with(expandable, &PoolInfo::use_on_oom) == 0);
}

TEST_CASE("pool inference: a deleted MemPool empties its own pool, not the default pools",
          "[snapshot_cases][pools][mempool]") {
  // `del pool` with no empty_cache() after it: ~MemPool's emptyCache(id) released the pool's segments
  // alone while the default pools kept their cached 40 MiB.
  Trace t = load_trace(kCases + "/mempool_allocator.expandable.pickle.gz");
  CHECK(pools_with(t, &PoolInfo::empties_on_release) >= 1);
  size_t first_release = 0;
  while (first_release < t.events.size() && t.events[first_release].kind != EventKind::SegmentFree) ++first_release;
  REQUIRE(first_release < t.events.size());
  REQUIRE(first_release > 0);
  const Event& before = t.events[first_release - 1];
  CHECK(before.kind == EventKind::PoolRelease);
  CHECK(t.meta.pools[before.pool].empties_on_release);
}

TEST_CASE("pools: other policies keep pools apart unless asked to merge them", "[snapshot_cases][pools]") {
  Trace t = load_trace(kCases + "/graph_mlp_train.default.pickle.gz");
  auto run = [&](const std::string& policy) {
    MemorySource src(t);
    ReplayOptions options;
    options.check_invariants = true;
    return replay_simulated(src, PolicySpec::parse(policy), SimDeviceConfig{}, options, &t.events);
  };
  ReplayResult separate = run("bestfit"), merged = run("bestfit:pools=merge");
  CHECK(separate.ooms.empty());
  CHECK(merged.ooms.empty());
  // Separate pools cannot share cached memory: never less reserved at the peak than one pool for all.
  CHECK(separate.reserved.bytes >= merged.reserved.bytes);
  CHECK(separate.reserved.bytes != merged.reserved.bytes);
  CHECK_THROWS_AS(run("bestfit:pools=shared"), PolicyConfigError);
  // The pytorch model routes pools itself; merging them is a what-if that changes its answer.
  CHECK(run("pytorch").reserved.bytes == 1354760192);
  CHECK(run("pytorch:pools=merge").reserved.bytes != 1354760192);
}

TEST_CASE("pools: the native and JSON Lines formats keep every event's pool", "[snapshot_cases][pools]") {
  for (const char* file :
       {"mempool_side.expandable.pickle.gz", "mempool_oom_fallback.expandable_cap0.02_poolalloc.pickle.gz"})
    for (const char* ext : {".fltrace", ".jsonl"}) {
      Trace t = load_trace(kCases + "/" + file);
      REQUIRE(t.meta.pools.size() > 1);
      std::string path =
          (std::filesystem::temp_directory_path() / ("fraglab_pools_" + std::to_string(::getpid()) + ext)).string();
      save_trace(t, path);
      Trace back = load_trace(path);
      CHECK(back.meta.pools == t.meta.pools);
      REQUIRE(back.events.size() == t.events.size());
      for (size_t i = 0; i < t.events.size(); ++i) {
        INFO(ext << " event " << i);
        CHECK(back.events[i].pool == t.events[i].pool);
        CHECK(back.events[i].kind == t.events[i].kind);
      }
      std::filesystem::remove(path);
    }
}

// A pass with nothing to infer (the segments name one pool, no revision, no expandable segments) skips the walk
// over the events: what it leaves is what the walk leaves, which an unused pool in the table forces.
TEST_CASE("pool inference: a pass with nothing to infer leaves what the walk leaves", "[snapshot_cases][pools]") {
  size_t compared = 0;
  for (const std::string& dir :
       {std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus", std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots"})
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string f = entry.path().string();
      if (!f.ends_with(".pickle.gz")) continue;
      INFO(f);
      const Trace t = read_trace(f);
      if (t.meta.pools.size() != 1 || recorded_expandable(t.meta) || !t.meta.expandable_flipped.empty()) continue;
      Trace skipped = t, walked = t;
      walked.meta.pools.push_back(PoolInfo{{-1, 0}});
      infer_pools(skipped, SnapshotModel{});
      infer_pools(walked, SnapshotModel{});
      CHECK(skipped.events == walked.events);
      walked.meta.pools.pop_back();
      CHECK(skipped.meta == walked.meta);
      ++compared;
    }
  CHECK(compared >= 15);
}

TEST_CASE("pool inference: more private pools than an event can name is an error, not a wrap",
          "[snapshot_cases][pools]") {
  Trace t;
  t.meta.source = "hostile.pickle";
  for (int64_t k = 0; k < 70000; ++k) {
    RecordedSegment s;
    s.address = static_cast<Addr>(k) << 21;
    s.total_size = 2 << 20;
    s.pool_id = {0, k + 1};
    t.meta.segments.push_back(s);
  }
  CHECK_THROWS_WITH(infer_pools(t, pytorch_snapshot_model()),
                    Catch::Contains("hostile.pickle") && Catch::Contains("65,535"));
}

TEST_CASE("diagnose: free memory at the peak is split by private pool", "[snapshot_cases][pools]") {
  Trace t = load_trace(kCases + "/graph_mlp_train.default.pickle.gz");
  DiagnoseOptions o;
  o.search = false;
  DiagnoseReport r = diagnose(t, "graph_mlp_train", std::nullopt, o);
  REQUIRE(r.ooms.size() == 1);  // the peak
  uint64_t graph_pool = 0, all = 0;
  for (const ByteShare& s : r.ooms[0].free_by_pool) {
    all += s.bytes;
    if (s.key.rfind("(1, 0) ", 0) == 0) graph_pool += s.bytes;
  }
  CHECK(graph_pool > 0);
  CHECK(graph_pool < all);  // and some in the default pools
}

// What users bring beyond the groups above (groups probe_* of scripts/record_snapshot_cases.sh, recorded on
// an H100 2026-11-26): HuggingFace generate() with a growing KV cache (a wrapped ring) and with a static cache
// that transformers compiles into CUDA graphs; fp16 training with gradient accumulation, a copy stream from
// pinned memory and a loss stream (record_stream on both); checkpointing with save_on_cpu offloading and
// causal SDPA on odd lengths; five streams with caching_allocator_alloc/delete, empty_strided and a second
// thread, and OOMs on every stream under max_split_size; a CUDA graph captured on a side stream while eager
// work runs on two others (its frees deferred until the capture ends); a prefetcher under a fraction whose
// OOM recoveries complete record_stream'd frees (synchronize_and_free_events); a transformer with the memory
// fraction lowered mid-run (its retries read as the program's empty_cache(), which is what they did) or the
// collector's fraction changed after the collector ran. Each replays call for call under fidelity, and plain
// replay (the simulated driver's addresses, the capacity inferred) reaches PyTorch's reserved peak.

TEST_CASE("pool inference: a deleted MemPool's small segment goes with it, the default pools keep theirs",
          "[snapshot_cases][pools][mempool]") {
  check_cases(
      {"mempool_mixed_burst.default.pickle.gz", "mempool_mixed_burst.expandable.pickle.gz",
       "mempool_mixed_burst.max_split_size_mb-128.pickle.gz",
       "mempool_mixed_burst.expandable_segments-True_max_split_size_mb-128.pickle.gz",
       "mempool_mixed_burst.expandable_segments-True_max_split_size_mb-64_roundup_power2_divisions-4.pickle.gz"});
  Trace t = load_trace(kCases + "/mempool_mixed_burst.expandable.pickle.gz");
  size_t first_unmap = 0;
  while (first_unmap < t.events.size() && t.events[first_unmap].kind != EventKind::SegmentUnmap) ++first_unmap;
  REQUIRE(first_unmap < t.events.size());
  REQUIRE(first_unmap > 0);
  const Event& before = t.events[first_unmap - 1];
  REQUIRE(before.kind == EventKind::PoolRelease);
  CHECK(t.meta.pools[before.pool].empties_on_release);
  // The small segment's requests are the pool's: every request before the deletion that landed where the first
  // unmap was (a later default segment may take the same addresses).
  const Event& small = t.events[first_unmap];
  size_t in_small = 0;
  for (size_t i = 0; i < first_unmap; ++i)
    if (const Event& e = t.events[i];
        e.kind == EventKind::Alloc && e.addr >= small.addr && e.addr < small.addr + small.size) {
      CHECK(e.pool == before.pool);
      ++in_small;
    }
  CHECK(in_small > 0);
  // No empty_cache() of the program follows the deletion: the run is the pool's alone.
  CHECK(t.events[first_unmap + 1].kind == EventKind::SegmentUnmap);
  CHECK(t.events[first_unmap + 2].kind != EventKind::EmptyCache);
  // Under expandable segments the pools are the program's: the MemPool's 32 requests (26 in the loop, 6
  // after it), the default pools' 76, no third pool (one of 8 default requests was read until a range
  // reserved again took its address hint from the recording's first maps).
  for (const char* file :
       {"mempool_mixed_burst.expandable.pickle.gz",
        "mempool_mixed_burst.expandable_segments-True_max_split_size_mb-128.pickle.gz",
        "mempool_mixed_burst.expandable_segments-True_max_split_size_mb-64_roundup_power2_divisions-4.pickle.gz"}) {
    INFO(file);
    const Trace read = load_trace(kCases + "/" + file);
    CHECK(read.meta.pools.size() == 2);
    std::map<PoolIndex, size_t> requests;
    for (const Event& e : read.events)
      if (e.kind == EventKind::Alloc) ++requests[e.pool];
    CHECK(requests == std::map<PoolIndex, size_t>{{0, 76}, {1, 32}});
  }
}
