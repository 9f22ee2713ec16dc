// The pytorch policy's model of PyTorch's CUDA caching allocator, rule by rule, against
// what c10/cuda/CUDACachingAllocator.cpp and c10/core/AllocatorConfig.cpp (PyTorch 2.11) do.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "allocators/pytorch/caching_allocator.h"
#include "allocators/pytorch/config.h"
#include "allocators/registry.h"
#include "device/call_log_device.h"
#include "device/sim_device.h"
#include "device/simulated_gpu.h"
#include "device/tracking_device.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"

using namespace fraglab;
using namespace fraglab::detail;

namespace {

constexpr uint64_t MiB = 1024 * 1024;

// A model on a simulated device that logs every device call.
struct Rig {
  explicit Rig(const std::string& conf, std::optional<uint64_t> capacity = std::nullopt,
               std::vector<PoolInfo> pools = {})
      : sim(SimDeviceConfig{capacity}),
        tracking(sim),
        dev(tracking),
        model(dev, PytorchAllocatorConfig::parse(conf), {0}, 80ull << 30, std::move(pools)) {}
  uint32_t malloc(uint64_t size) {
    auto b = model.malloc(size, 0);
    REQUIRE(b);
    return *b;
  }
  Addr addr(uint32_t b) const { return model.block(b).addr; }
  uint64_t size(uint32_t b) const { return model.block(b).size; }
  // The device calls so far as "alloc 20", "free 40", "map 20", "unmap 40" (MiB).
  std::vector<std::string> calls() const {
    std::vector<std::string> out;
    for (const auto& c : dev.calls()) {
      const char* k = c.kind == EventKind::SegmentAlloc  ? "alloc"
                      : c.kind == EventKind::SegmentFree ? "free"
                      : c.kind == EventKind::SegmentMap  ? "map"
                                                         : "unmap";
      out.push_back(std::string(k) + " " + std::to_string(c.size / MiB) + (c.size % MiB ? "+" : ""));
    }
    return out;
  }
  SimulatedGpu sim;
  TrackingDevice tracking;
  CallLogDevice dev;
  PytorchCachingAllocator model;
};

using Calls = std::vector<std::string>;

}  // namespace

TEST_CASE("pytorch: PYTORCH_CUDA_ALLOC_CONF is parsed as PyTorch parses it", "[pytorch]") {
  auto c =
      PytorchAllocatorConfig::parse("expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.6");
  CHECK(c.expandable_segments);
  CHECK(c.max_split_size == 128 * MiB);
  CHECK(c.garbage_collection_threshold == Approx(0.6));
  CHECK(PytorchAllocatorConfig::parse("").max_split_size == UINT64_MAX);

  auto scalar = PytorchAllocatorConfig::parse("roundup_power2_divisions:4");
  for (uint64_t d : scalar.roundup_power2_divisions) CHECK(d == 4);

  // The list form: intervals in MiB; the first entry fills everything below it, and `>` fills the
  // intervals after the last named one (PyTorch 2.11's std::fill from last_index + 1: the snapshot it
  // recorded for this text holds {..., 256: 1, 512: 2, 1024: 4, ...}).
  auto list = PytorchAllocatorConfig::parse("roundup_power2_divisions:[256:1,512:2,>:4]");
  for (size_t i = 0; i <= 8; ++i) CHECK(list.roundup_power2_divisions[i] == 1);
  CHECK(list.roundup_power2_divisions[9] == 2);
  for (size_t i = 10; i <= 15; ++i) CHECK(list.roundup_power2_divisions[i] == 4);
  auto partial = PytorchAllocatorConfig::parse("roundup_power2_divisions:[64:8,128:2]");
  CHECK(partial.roundup_power2_divisions[0] == 8);
  CHECK(partial.roundup_power2_divisions[6] == 8);
  CHECK(partial.roundup_power2_divisions[7] == 2);
  CHECK(partial.roundup_power2_divisions[8] == 0);
  CHECK(partial.divisions_for(100 * MiB) == 8);  // [64 MiB, 128 MiB) is interval 6
  CHECK(partial.divisions_for(200 * MiB) == 2);
  CHECK(partial.divisions_for(1000) == 8);  // below 1 MiB: interval 0

  CHECK_THROWS_AS(PytorchAllocatorConfig::parse("max_split_size_mb:10"), PolicyConfigError);  // < 20 MiB
  CHECK_THROWS_AS(PytorchAllocatorConfig::parse("expandable_segments:Yes"), PolicyConfigError);
  CHECK_THROWS_AS(PytorchAllocatorConfig::parse("roundup_power2_divisions:3"), PolicyConfigError);
  CHECK_THROWS_AS(PytorchAllocatorConfig::parse("roundup_power2_divisions:[100:2]"), PolicyConfigError);
  CHECK_THROWS_AS(PytorchAllocatorConfig::parse("garbage_collection_threshold:1.5"), PolicyConfigError);
  CHECK_THROWS_AS(PytorchAllocatorConfig::parse("max_split_mb:128"), PolicyConfigError);
  CHECK_THROWS_AS(PytorchAllocatorConfig::parse("backend:cudaMallocAsync"), PolicyConfigError);
  CHECK_THROWS_AS(PytorchAllocatorConfig::parse("max_split_size_mb"), PolicyConfigError);

  // to_conf() says the same thing back.
  for (std::string conf : {"expandable_segments:True,max_split_size_mb:128", "roundup_power2_divisions:4",
                           "roundup_power2_divisions:[256:1,512:2,>:4]", "garbage_collection_threshold:0.6"}) {
    auto a = PytorchAllocatorConfig::parse(conf);
    auto b = PytorchAllocatorConfig::parse(a.to_conf());
    CHECK(a.to_conf() == b.to_conf());
    CHECK(a.roundup_power2_divisions == b.roundup_power2_divisions);
    CHECK(a.max_split_size == b.max_split_size);
  }
}

// What PyTorch 2.11 itself accepted and recorded for each settings text (tools/alloc_conf_keys/probe.py, run
// on an H100 on 2026-11-26, both variables): the parser accepts exactly those, and reads the values the
// snapshot recorded for them.
TEST_CASE("pytorch: the settings parser agrees with PyTorch 2.11 on every probed text", "[pytorch][settings]") {
  std::ifstream in(std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/alloc_conf_keys_torch2.11.jsonl");
  REQUIRE(in);
  std::string line;
  size_t rows = 0, accepted = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    const std::string conf = row.at("conf");
    INFO(conf);
    ++rows;
    if (!row.at("accepted").get<bool>()) {
      CHECK_THROWS_AS(PytorchAllocatorConfig::parse(conf), PolicyConfigError);
      continue;
    }
    ++accepted;
    const PytorchAllocatorConfig c = PytorchAllocatorConfig::parse(conf);
    const auto& recorded = row.at("settings");
    const int64_t max_split = recorded.at("max_split_size");
    CHECK(c.max_split_size == (max_split < 0 ? UINT64_MAX : static_cast<uint64_t>(max_split)));
    CHECK(c.garbage_collection_threshold == Approx(recorded.at("garbage_collection_threshold").get<double>()));
    CHECK(c.expandable_segments == recorded.at("expandable_segments").get<bool>());
    for (size_t k = 0; k < kRoundUpPowerOfTwoIntervals; ++k)
      CHECK(c.roundup_power2_divisions[k] ==
            recorded.at("roundup_power2_divisions").at(std::to_string(1ull << k)).get<uint64_t>());
    // The fraction the process ran under (torch.cuda.get_per_process_memory_fraction).
    CHECK(c.per_process_memory_fraction.value_or(1.0) == Approx(row.at("fraction").get<double>()));
  }
  CHECK(rows == 48);
  CHECK(accepted == 36);
}

TEST_CASE("pytorch: large_segment_size_mb sizes 1-10 MiB segments and bounds max_split_size_mb",
          "[pytorch][settings]") {
  const auto c = PytorchAllocatorConfig::parse("large_segment_size_mb:40,max_split_size_mb:40");
  CHECK(c.large_segment_size == 40 * MiB);
  CHECK(c.max_non_split_rounding_size == 40 * MiB);  // reset to the large segment size
  CHECK(pytorch_allocation_size(MiB + 512, c.large_segment_size) == 40 * MiB);
  CHECK(pytorch_allocation_size(10 * MiB, c.large_segment_size) == 10 * MiB);
  CHECK_THROWS_WITH(PytorchAllocatorConfig::parse("large_segment_size_mb:32,max_split_size_mb:24"),
                    Catch::Contains("must be >= 32"));
  CHECK_THROWS_WITH(PytorchAllocatorConfig::parse("large_segment_size_mb:10"), Catch::Contains("must be > 10 MB"));
  CHECK(PytorchAllocatorConfig::parse(c.to_conf()).large_segment_size == 40 * MiB);
  // A recorded text PyTorch accepted is never refused: a key of a later PyTorch is skipped and named.
  PytorchAllocatorConfig r;
  std::vector<std::string> unknown;
  r.apply_recorded({{"PYTORCH_CUDA_ALLOC_CONF",
                     "throw_on_cudamalloc_oom:True,expandable_segments_reserve:[0.5],max_split_size_mb:64"}},
                   &unknown);
  CHECK(r.max_split_size == 64 * MiB);
  CHECK(unknown == std::vector<std::string>{"throw_on_cudamalloc_oom", "expandable_segments_reserve"});
  // A what-if's text is held to PyTorch's own check.
  CHECK_THROWS_WITH(PytorchAllocatorConfig::parse("throw_on_cudamalloc_oom:True"),
                    Catch::Contains("Unrecognized key 'throw_on_cudamalloc_oom'"));
}

TEST_CASE("pytorch: recorded settings are the start, the command line overrides them", "[pytorch]") {
  TraceMeta meta;
  meta.allocator_settings = {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128"},
                             {"max_split_size", "134217728"},
                             {"expandable_segments", "False"},
                             {"garbage_collection_threshold", "0.0"},
                             {"roundup_power2_divisions.1", "0"},
                             {"roundup_power2_divisions.64", "4"},
                             {"roundup_power2_divisions.32768", "0"}};
  PytorchAllocatorConfig c;
  c.apply_recorded(meta.allocator_settings);
  CHECK(c.max_split_size == 128 * MiB);
  CHECK(c.roundup_power2_divisions[6] == 4);
  c.apply("expandable_segments:True,max_split_size_mb:256");
  CHECK(c.expandable_segments);
  CHECK(c.max_split_size == 256 * MiB);

  // Through the registry: an unknown option is refused, a PyTorch one accepted.
  SimDevice sim;
  CHECK_THROWS_AS(make_policy(PolicySpec::parse("pytorch:max_split:3"), sim, meta), PolicyConfigError);
  CHECK(make_policy(PolicySpec::parse("pytorch:expandable_segments:True,roundup_power2_divisions:[256:1,>:4]"), sim,
                    meta) != nullptr);
  meta.allocator_settings["max_split_size"] = "many";
  CHECK_THROWS_AS(make_policy(PolicySpec::parse("pytorch"), sim, meta), PolicyConfigError);
}

TEST_CASE("pytorch: PYTORCH_ALLOC_CONF is read where PYTORCH_CUDA_ALLOC_CONF is, in PyTorch's order", "[pytorch]") {
  // Only the newer name recorded (a trace from a recorder that saved the environment).
  std::map<std::string, std::string> settings = {
      {"PYTORCH_ALLOC_CONF", "expandable_segments:True,max_split_size_mb:64"}};
  auto conf = recorded_conf(settings);
  REQUIRE(conf);
  CHECK(std::string(conf.variable) == "PYTORCH_ALLOC_CONF");
  PytorchAllocatorConfig c;
  c.apply_recorded(settings);
  CHECK(c.expandable_segments);
  CHECK(c.max_split_size == 64 * MiB);

  // Both set: PyTorch parses the first of PYTORCH_CUDA_ALLOC_CONF, PYTORCH_HIP_ALLOC_CONF,
  // PYTORCH_ALLOC_CONF that is set (AcceleratorAllocatorConfig::instance()).
  settings["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:256";
  CHECK(std::string(recorded_conf(settings).variable) == "PYTORCH_CUDA_ALLOC_CONF");
  PytorchAllocatorConfig both;
  both.apply_recorded(settings);
  CHECK_FALSE(both.expandable_segments);
  CHECK(both.max_split_size == 256 * MiB);
  settings.erase("PYTORCH_CUDA_ALLOC_CONF");
  settings["PYTORCH_HIP_ALLOC_CONF"] = "garbage_collection_threshold:0.5";
  CHECK(std::string(recorded_conf(settings).variable) == "PYTORCH_HIP_ALLOC_CONF");
  CHECK_FALSE(recorded_conf({{"max_split_size", "-1"}}));

  // Through the policy, with the recorded text under the new name only.
  TraceMeta meta;
  meta.allocator_settings = {{"PYTORCH_ALLOC_CONF", "max_split_size_mb:nonsense"}};
  SimDevice sim;
  CHECK_THROWS(make_policy(PolicySpec::parse("pytorch"), sim, meta));
  CHECK(make_policy(PolicySpec::parse("pytorch:recorded_settings=false"), sim, meta) != nullptr);
}

TEST_CASE("pytorch: size rounding and segment sizes", "[pytorch]") {
  PytorchAllocatorConfig plain;
  CHECK(pytorch_round_size(1, plain) == 512);
  CHECK(pytorch_round_size(512, plain) == 512);
  CHECK(pytorch_round_size(513, plain) == 1024);
  CHECK(pytorch_round_size(5 * MiB + 1, plain) == 5 * MiB + 512);
  CHECK(pytorch_roundup_power2_next_division(1200, 4) == 1280);  // the source's own example
  CHECK(pytorch_roundup_power2_next_division(1024, 4) == 1024);
  auto four = PytorchAllocatorConfig::parse("roundup_power2_divisions:4");
  CHECK(pytorch_round_size(5 * MiB + 1, four) == 6 * MiB);  // [4, 8) MiB in steps of 1 MiB
  CHECK(pytorch_round_size(1200, four) == 1536);            // 1200 <= 512 * 4: plain 512 rounding
  CHECK(pytorch_round_size(3000, four) == 3072);
  CHECK(pytorch_allocation_size(512) == 2 * MiB);
  CHECK(pytorch_allocation_size(MiB) == 2 * MiB);
  CHECK(pytorch_allocation_size(MiB + 512) == 20 * MiB);
  CHECK(pytorch_allocation_size(10 * MiB - 512) == 20 * MiB);
  CHECK(pytorch_allocation_size(10 * MiB) == 10 * MiB);
  CHECK(pytorch_allocation_size(11 * MiB + 512) == 12 * MiB);
}

TEST_CASE("pytorch: small and large pools, splitting rules, best fit by size then address", "[pytorch]") {
  Rig r("");
  uint32_t a = r.malloc(1000);  // small pool: a 2 MiB segment, split (remainder >= 512)
  uint32_t b = r.malloc(1000);
  CHECK(r.size(a) == 1024);
  CHECK(r.addr(b) == r.addr(a) + 1024);
  uint32_t c = r.malloc(3 * MiB);  // 1..10 MiB: a 20 MiB segment, split (remainder > 1 MiB)
  CHECK(r.size(c) == 3 * MiB);
  uint32_t d = r.malloc(19 * MiB + MiB / 2);  // >= 10 MiB: 20 MiB segment, remainder 0.5 MiB kept
  CHECK(r.size(d) == 20 * MiB);
  CHECK(r.calls() == Calls{"alloc 2", "alloc 20", "alloc 20"});

  // Two free 4 MiB holes of equal size: the lower address wins.
  uint32_t e = r.malloc(4 * MiB), f = r.malloc(4 * MiB), g = r.malloc(4 * MiB), h = r.malloc(4 * MiB);
  (void)f, (void)h;
  r.model.free(g);
  r.model.free(e);
  uint32_t i = r.malloc(4 * MiB);
  CHECK(r.addr(i) == r.addr(c) + 3 * MiB);  // e's place, below g's
  (void)a, (void)b;
}

TEST_CASE("pytorch: freed blocks merge with free neighbours; empty_cache frees whole segments", "[pytorch]") {
  Rig r("");
  uint32_t a = r.malloc(4 * MiB), b = r.malloc(4 * MiB), c = r.malloc(4 * MiB);
  r.model.empty_cache();  // the segment is in use: nothing to release
  CHECK(r.calls() == Calls{"alloc 20"});
  r.model.free(a);
  r.model.free(c);  // merges with the free tail
  CHECK(r.model.cached_blocks() == 2);
  r.model.free(b);  // joins both: the whole segment again
  CHECK(r.model.cached_blocks() == 1);
  r.model.empty_cache();
  CHECK(r.calls() == Calls{"alloc 20", "free 20"});
  CHECK(r.model.stats().reserved == 0);
}

TEST_CASE("pytorch: max_split_size keeps oversize blocks whole and for large requests only", "[pytorch]") {
  Rig r("max_split_size_mb:40");
  uint32_t big = r.malloc(50 * MiB);
  r.model.free(big);
  uint32_t small = r.malloc(30 * MiB);  // below max_split_size: may not take the oversize block
  CHECK(r.calls() == Calls{"alloc 50", "alloc 30"});
  uint32_t large = r.malloc(45 * MiB);  // >= max_split_size: the 50 MiB block, within 20 MiB
  CHECK(r.size(large) == 50 * MiB);     // and not split
  r.model.free(large);
  r.model.free(small);
  uint32_t larger = r.malloc(29 * MiB + 1);  // below max_split_size: the best non-oversize fit
  CHECK(r.size(larger) == 30 * MiB);         // the 30 MiB block, not split (30 < 40, remainder < 1 MiB)
  auto m = r.model.malloc(25 * MiB, 0);      // 30 MiB is taken, 50 MiB oversize: a new segment
  REQUIRE(m);
  CHECK(r.calls() == Calls{"alloc 50", "alloc 30", "alloc 26"});
}

TEST_CASE("pytorch: out of memory recovery frees cached blocks as PyTorch does, then fails", "[pytorch]") {
  SECTION("release_available_cached_blocks frees oversize blocks, largest first, until enough") {
    Rig r("max_split_size_mb:20", 100 * MiB);
    uint32_t a = r.malloc(40 * MiB), b = r.malloc(30 * MiB);
    r.model.free(a);
    r.model.free(b);
    r.malloc(50 * MiB);  // 70 cached + 50 > 100: free 40, then 30, then retry
    CHECK(r.calls() == Calls{"alloc 40", "alloc 30", "free 40", "free 30", "alloc 50"});
    CHECK(r.model.stats().num_alloc_retries == 0);
    // Nothing cached left to free: release_cached_blocks, a counted retry, then OOM.
    CHECK_FALSE(r.model.malloc(60 * MiB, 0));
    CHECK(r.model.stats().num_alloc_retries == 1);
    CHECK(r.model.stats().num_ooms == 1);
  }
  SECTION("without max_split_size: release_cached_blocks frees every whole cached segment, then the retry") {
    Rig r("", 100 * MiB);
    uint32_t a = r.malloc(3 * MiB);
    uint32_t s = r.malloc(1000);
    uint32_t keep = r.malloc(1000);  // keeps the small segment in use
    r.model.free(a);
    r.model.free(s);
    r.malloc(80 * MiB);  // 22 + 80 > 100
    CHECK(r.calls() == Calls{"alloc 20", "alloc 2", "free 20", "alloc 80"});
    CHECK(r.model.stats().num_alloc_retries == 1);
    (void)keep;
  }
  SECTION("the replay engine records the failure as an OOM") {
    Trace t;
    t.events.push_back(Event{EventKind::Alloc, 0, 0, 60 * MiB});
    t.events.push_back(Event{EventKind::Alloc, 0, 1, 60 * MiB});
    MemorySource src(t);
    SimDeviceConfig config;
    config.capacity = 100 * MiB;
    ReplayResult res = replay_simulated(src, PolicySpec::parse("pytorch"), config, ReplayOptions{});
    REQUIRE(res.ooms.size() == 1);
    CHECK(res.ooms[0].event_index == 1);
    CHECK(res.ooms[0].reserved == 60 * MiB);
  }
}

TEST_CASE("pytorch: garbage_collection_threshold reclaims old cached segments under a memory fraction", "[pytorch]") {
  // Capacity 100 MiB, threshold 0.3: above 30 MiB reserved, segments at least as old as the
  // average (in get_free_block calls since they were cached) go before a new cudaMalloc.
  Rig gc("garbage_collection_threshold:0.3", 100 * MiB);
  gc.model.free(gc.malloc(40 * MiB));
  gc.malloc(50 * MiB);
  CHECK(gc.calls() == Calls{"alloc 40", "free 40", "alloc 50"});

  Rig plain("", 100 * MiB);  // no threshold: the cached block stays
  plain.model.free(plain.malloc(40 * MiB));
  plain.malloc(50 * MiB);
  CHECK(plain.calls() == Calls{"alloc 40", "alloc 50"});

  Rig uncapped("garbage_collection_threshold:0.3");  // no fraction set: no GC either
  uncapped.model.free(uncapped.malloc(40 * MiB));
  uncapped.malloc(50 * MiB);
  CHECK(uncapped.calls() == Calls{"alloc 40", "alloc 50"});
}

TEST_CASE("pytorch: expandable segments grow by pages and unmap on release", "[pytorch]") {
  Rig r("expandable_segments:True");
  uint32_t a = r.malloc(3 * MiB);   // large pool: 20 MiB pages
  uint32_t b = r.malloc(30 * MiB);  // 17 MiB free at the end: one more page, contiguous
  CHECK(r.addr(b) == r.addr(a) + 3 * MiB);
  uint32_t s = r.malloc(1000);  // small pool: its own segment, 2 MiB pages
  CHECK(r.calls() == Calls{"map 20", "map 20", "map 2"});
  r.model.free(a);
  r.model.empty_cache();  // only pages wholly free: none yet (a's 3 MiB is inside page 0)
  CHECK(r.calls().size() == 3);
  r.model.free(b);
  r.model.free(s);
  r.model.empty_cache();
  CHECK(r.calls() == Calls{"map 20", "map 20", "map 2", "unmap 40", "unmap 2"});
  CHECK(r.model.stats().reserved == 0);
  CHECK(r.tracking.counts().releases == 2);  // both address ranges given back
}

TEST_CASE("pytorch: expandable segments split even large blocks and map only what is missing", "[pytorch]") {
  Rig r("expandable_segments:True");
  uint32_t a = r.malloc(25 * MiB);  // two 20 MiB pages; the 15 MiB remainder is split off
  CHECK(r.size(a) == 25 * MiB);
  uint32_t b = r.malloc(15 * MiB);  // fits the remainder: no new page
  CHECK(r.addr(b) == r.addr(a) + 25 * MiB);
  CHECK(r.calls() == Calls{"map 40"});
}

TEST_CASE("pytorch: under a cap, expandable segments are unmapped, never cudaFree'd, by the recovery", "[pytorch]") {
  // release_available_cached_blocks skips expandable blocks (it could only cudaFree them);
  // release_cached_blocks unmaps their pages and gives the empty range back, then the retry maps.
  Rig r("expandable_segments:True,max_split_size_mb:20", 100 * MiB);
  r.model.free(r.malloc(50 * MiB));  // three 20 MiB pages, all free again
  r.malloc(70 * MiB);                // 60 + 70 > 100
  CHECK(r.calls() == Calls{"map 60", "unmap 60", "map 80"});
  CHECK(r.model.stats().num_alloc_retries == 1);
  CHECK(r.model.stats().reserved == 80 * MiB);
}

// ---- private pools (beginAllocateToPool / releasePool / release_cached_blocks with graph_pools_freeable) ----

TEST_CASE("pytorch: a private pool's requests never share blocks with the default pools", "[pytorch][pools]") {
  Rig r("");
  uint32_t d = r.malloc(4 * MiB);  // default pools: a 20 MiB segment
  const Addr default_block = r.addr(d);
  r.model.free(d);
  auto p = r.model.malloc(4 * MiB, 0, 1);  // private pool 1: the cached 20 MiB is not its own
  REQUIRE(p);
  CHECK(r.calls() == Calls{"alloc 20", "alloc 20"});
  r.model.free(*p);
  uint32_t d2 = r.malloc(4 * MiB);  // back in the default pools: their own cached block, at the same place
  CHECK(r.addr(d2) == default_block);
  CHECK(r.calls().size() == 2);
}

TEST_CASE("pytorch: empty_cache keeps a private pool's segments until the pool is released, then drops the pool",
          "[pytorch][pools]") {
  Rig r("");
  auto p = r.model.malloc(30 * MiB, 0, 1);
  REQUIRE(p);
  r.model.free(*p);
  r.model.empty_cache();  // the graph (or MemPool) still owns its pool
  CHECK(r.calls() == Calls{"alloc 30"});
  CHECK(r.model.has_private_pool(1));
  r.model.release_pool(1);                // releasePool: use_count 0, graph_pools_freeable
  CHECK(r.calls() == Calls{"alloc 30"});  // nothing until the cache is emptied
  r.model.empty_cache();
  CHECK(r.calls() == Calls{"alloc 30", "free 30"});
  CHECK_FALSE(r.model.has_private_pool(1));  // cudaMalloc_count 0: erased from graph_pools
}

TEST_CASE("pytorch: a released pool whose blocks are still in use is kept until they are freed", "[pytorch][pools]") {
  Rig r("");
  auto a = r.model.malloc(4 * MiB, 0, 2), b = r.model.malloc(30 * MiB, 0, 2);
  REQUIRE((a && b));
  r.model.free(*b);
  r.model.release_pool(2);
  r.model.empty_cache();  // the 30 MiB segment goes; the 20 MiB one holds a live block (a static output)
  CHECK(r.calls() == Calls{"alloc 20", "alloc 30", "free 30"});
  CHECK(r.model.has_private_pool(2));
  r.model.free(*a);
  r.model.empty_cache();
  CHECK(r.calls() == Calls{"alloc 20", "alloc 30", "free 30", "free 20"});
  CHECK_FALSE(r.model.has_private_pool(2));
}

TEST_CASE("pytorch: a private pool's request at the limit frees only its own pool (no release_cached_blocks)",
          "[pytorch][pools]") {
  SECTION("private request: the default pools' cache stays, out of memory") {
    Rig r("", 60 * MiB);
    uint32_t d = r.malloc(30 * MiB);
    r.model.free(d);
    CHECK_FALSE(r.model.malloc(40 * MiB, 0, 1));  // 30 + 40 > 60, and malloc may not empty the cache mid-capture
    CHECK(r.calls() == Calls{"alloc 30"});
  }
  SECTION("default request: release_cached_blocks, then the retry") {
    Rig r("", 60 * MiB);
    uint32_t d = r.malloc(30 * MiB);
    r.model.free(d);
    CHECK(r.model.malloc(40 * MiB, 0, 0));
    CHECK(r.calls() == Calls{"alloc 30", "free 30", "alloc 40"});
  }
}

TEST_CASE("pytorch: expandable segments in a private pool are that pool's own range", "[pytorch][pools]") {
  Rig r("expandable_segments:True");
  uint32_t d = r.malloc(30 * MiB);
  auto p = r.model.malloc(30 * MiB, 0, 1);
  REQUIRE(p);
  CHECK(r.calls() == Calls{"map 40", "map 40"});  // a second range, not the default one grown
  CHECK(r.addr(*p) != r.addr(d) + 40 * MiB);
  r.model.free(*p);
  r.model.release_pool(1);
  r.model.empty_cache();
  CHECK(r.calls() == Calls{"map 40", "map 40", "unmap 40"});
}

// ---- MemPool(allocator=..., use_on_oom=..., no_split=...) (PyTorch 2.11's MemPool arguments) ----

namespace {

// The default pools and private pool 1 made with the given MemPool arguments.
std::vector<PoolInfo> pool_one(bool own_allocator, bool use_on_oom, bool no_split) {
  PoolInfo p{{0, 1}};
  p.own_allocator = own_allocator;
  p.use_on_oom = use_on_oom;
  p.no_split = no_split;
  return {PoolInfo{}, p};
}

}  // namespace

TEST_CASE("pytorch: a MemPool with its own allocator gets cudaMalloc-style segments under expandable segments",
          "[pytorch][pools][mempool]") {
  // malloc: is_expandable_segments_active = expandable_segments && !active_user_pool; alloc_block then
  // calls the allocator's raw_alloc (allocPrimitive) for get_allocation_size(), and should_split uses
  // the cudaMalloc rules (a large block keeps a remainder of 1 MiB or less).
  Rig r("expandable_segments:True", std::nullopt, pool_one(true, false, false));
  auto a = r.model.malloc(13 * MiB + MiB / 2, 0, 1);  // a 14 MiB segment, not split: 0.5 MiB left
  auto b = r.model.malloc(5'000'000, 0, 1);           // a 20 MiB segment, split
  uint32_t d = r.malloc(5'000'000);                   // the default pools: still expandable
  REQUIRE((a && b));
  CHECK(r.calls() == Calls{"alloc 14", "alloc 20", "map 20"});
  CHECK(r.size(*a) == 14 * MiB);
  CHECK(r.size(*b) == 5'000'192);  // 512-rounded: the remainder went back to the pool
  CHECK(r.model.block(*a).segment == kNoNode);
  CHECK(r.model.block(d).segment != kNoNode);
  r.model.free(*a);
  r.model.free(*b);
  r.model.release_pool(1);
  r.model.empty_cache();  // raw_delete of the pool's segments (release_block), as cudaFree
  CHECK(r.calls() == Calls{"alloc 14", "alloc 20", "map 20", "free 14", "free 20"});
}

TEST_CASE("pytorch: a no_split MemPool's requests take whole blocks", "[pytorch][pools][mempool]") {
  SECTION("cudaMalloc segments: each block is a whole segment") {
    Rig r("", std::nullopt, pool_one(false, false, true));
    auto a = r.model.malloc(5'000'000, 0, 1);  // a whole 20 MiB segment
    auto b = r.model.malloc(3'000'000, 0, 1);  // nothing split off a: another segment
    auto c = r.model.malloc(300'000, 0, 1);    // a whole 2 MiB small segment
    auto d = r.model.malloc(200'000, 0, 1);
    REQUIRE((a && b && c && d));
    CHECK(r.calls() == Calls{"alloc 20", "alloc 20", "alloc 2", "alloc 2"});
    CHECK(r.size(*a) == 20 * MiB);
    CHECK(r.size(*c) == 2 * MiB);
    r.model.free(*a);
    auto f = r.model.malloc(1'500'000, 0, 1);  // a's whole block again
    REQUIRE(f);
    CHECK(r.addr(*f) == r.addr(*a));
    CHECK(r.size(*f) == 20 * MiB);
    uint32_t x = r.malloc(5'000'000), y = r.malloc(3'000'000);  // the default pools split as ever
    CHECK(r.addr(y) == r.addr(x) + r.size(x));
    CHECK(r.calls().size() == 5);
  }
  SECTION("expandable segments: the mapped pages, whole") {
    Rig r("expandable_segments:True", std::nullopt, pool_one(false, false, true));
    auto e = r.model.malloc(30 * MiB, 0, 1);  // maps 40 MiB and takes all of it
    auto g = r.model.malloc(4 * MiB, 0, 1);   // another page
    REQUIRE((e && g));
    CHECK(r.calls() == Calls{"map 40", "map 20"});
    CHECK(r.size(*e) == 40 * MiB);
    CHECK(r.size(*g) == 20 * MiB);
  }
}

TEST_CASE("pytorch: a use_on_oom MemPool serves default requests that get no segment", "[pytorch][pools][mempool]") {
  SECTION("before malloc frees the default pools' cache, split by the cudaMalloc rules") {
    Rig r("", 80 * MiB, pool_one(false, true, false));
    auto reserve = r.model.malloc(60 * MiB, 0, 1);  // the overflow reserve, cached in the pool
    REQUIRE(reserve);
    const Addr reserve_addr = r.addr(*reserve);
    r.model.free(*reserve);
    uint32_t d = r.malloc(10 * MiB);
    r.model.free(d);                       // the default pools cache a 10 MiB segment
    auto x = r.model.malloc(34 * MiB, 0);  // no fit; 60 + 10 + 34 > 80: try_mempool_fallback
    REQUIRE(x);
    CHECK(r.calls() == Calls{"alloc 60", "alloc 10"});  // release_cached_blocks never ran
    CHECK(r.addr(*x) == reserve_addr);
    CHECK(r.size(*x) == 34 * MiB);         // split: 26 MiB back in the pool
    auto y = r.model.malloc(20 * MiB, 0);  // the remainder, again by fallback
    REQUIRE(y);
    CHECK(r.addr(*y) == reserve_addr + 34 * MiB);
    CHECK(r.calls().size() == 2);
    CHECK(r.model.stats().num_alloc_retries == 0);
  }
  SECTION("a pool that did not opt in, a private request, or a deleted MemPool: no fallback") {
    for (int which = 0; which < 3; ++which) {
      Rig r("", 100 * MiB, pool_one(false, which != 0, false));
      auto reserve = r.model.malloc(60 * MiB, 0, 1);
      REQUIRE(reserve);
      r.model.free(*reserve);
      if (which == 2) r.model.release_pool(1);    // ~MemPool: setUseOnOOM(false), releasePool
      const PoolIndex pool = which == 1 ? 2 : 0;  // which 1: a request bound for another private pool
      auto x = r.model.malloc(50 * MiB, 0, pool);
      if (which == 2) {
        REQUIRE(x);  // release_cached_blocks returned the released pool's cache, then the retry
        CHECK(r.calls() == Calls{"alloc 60", "free 60", "alloc 50"});
      } else {
        CHECK_FALSE(x);  // an owned pool keeps its cache through malloc's release: out of memory
        CHECK(r.calls() == Calls{"alloc 60"});
      }
    }
  }
  SECTION("expandable segments: a plain pool's blocks are expandable and skipped; an allocator pool's serve") {
    for (bool own_allocator : {false, true}) {
      Rig r("expandable_segments:True", 100 * MiB, pool_one(own_allocator, true, false));
      auto reserve = r.model.malloc(60 * MiB, 0, 1);
      REQUIRE(reserve);
      r.model.free(*reserve);
      auto x = r.model.malloc(50 * MiB, 0);  // 60 + 50 > 100: no segment for the default pools
      if (own_allocator) {
        REQUIRE(x);  // the pool's cudaMalloc'd block, by fallback, split by the cudaMalloc rules
        CHECK(r.calls() == Calls{"alloc 60"});
        CHECK(r.size(*x) == 50 * MiB);
      } else {
        // get_free_block with expandable segments off skips the pool's mapped block, and malloc's
        // release_cached_blocks leaves an owned pool's pages: out of memory.
        CHECK_FALSE(x);
        CHECK(r.calls() == Calls{"map 60"});
      }
    }
  }
}

TEST_CASE("pytorch: a MemPool's release empties that pool alone; a graph's waits for empty_cache",
          "[pytorch][pools][mempool]") {
  // ~MemPool: releasePool, then emptyCache(id), which releases that pool's cached segments and leaves the
  // default pools' (release_cached_blocks with a private MempoolId); CUDAGraph::reset only releasePool.
  std::vector<PoolInfo> pools{PoolInfo{}, PoolInfo{{0, 1}}, PoolInfo{{1, 0}}};
  pools[1].empties_on_release = true;
  Rig r("", std::nullopt, pools);
  uint32_t d = r.malloc(30 * MiB);
  auto m = r.model.malloc(40 * MiB, 0, 1), g = r.model.malloc(50 * MiB, 0, 2);
  REQUIRE((m && g));
  r.model.free(d);
  r.model.free(*m);
  r.model.free(*g);
  r.model.release_pool(2);  // the graph: nothing yet
  CHECK(r.calls() == Calls{"alloc 30", "alloc 40", "alloc 50"});
  r.model.release_pool(1);  // the MemPool: its 40 MiB at once, not the default 30 nor the graph's 50
  CHECK(r.calls() == Calls{"alloc 30", "alloc 40", "alloc 50", "free 40"});
  CHECK_FALSE(r.model.has_private_pool(1));
  r.model.empty_cache();
  CHECK(r.calls() == Calls{"alloc 30", "alloc 40", "alloc 50", "free 40", "free 30", "free 50"});
}

TEST_CASE("pools: a MemPool's release empties its instance under other policies too", "[pools][mempool]") {
  SimDevice sim;
  TrackingDevice device(sim);
  TraceMeta meta;
  meta.pools = {PoolInfo{}, PoolInfo{{0, 1}}, PoolInfo{{1, 0}}};
  meta.pools[1].empties_on_release = true;
  auto policy = make_policy(PolicySpec::parse("bestfit"), device, meta);
  auto a = policy->allocate(AllocRequest{0, 8 * MiB, 0, 0, 1});
  auto b = policy->allocate(AllocRequest{1, 8 * MiB, 0, 1, 2});
  REQUIRE((a && b));
  policy->deallocate(*a);
  policy->deallocate(*b);
  const uint64_t reserved = device.reserved_bytes();
  policy->release_pool(2);  // a graph's pool: kept until empty_cache
  CHECK(device.reserved_bytes() == reserved);
  policy->release_pool(1);  // a MemPool: emptied at once
  CHECK(device.reserved_bytes() < reserved);
  const uint64_t after_mempool = device.reserved_bytes();
  policy->empty_cache();
  CHECK(device.reserved_bytes() < after_mempool);
}
