// Framework allocators (BFC, RMM, CuPy, cudaMallocAsync, GMLake, oracle) and the
// alias_pages device extension: behaviour the modelled sources define.
#include <catch2/catch.hpp>

#include <cctype>
#include <cmath>
#include <random>

#include "allocators/registry.h"
#include "device/call_log_device.h"
#include "device/sim_device.h"
#include "device/simulated_gpu.h"
#include "device/tracking_device.h"
#include "import/trace_import.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "traces/trace_io.h"

using namespace fraglab;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// A policy on a tracked simulated device, driven by hand.
struct Bench {
  SimulatedGpu sim;
  TrackingDevice device{sim};
  TraceMeta meta;
  std::unique_ptr<Policy> policy;
  uint64_t next_index = 0;

  explicit Bench(const std::string& spec, SimDeviceConfig config = {}, const std::vector<Event>* events = nullptr)
      : sim(config) {
    meta.streams = {0, 1, 2, 3};
    policy = make_policy(PolicySpec::parse(spec), device, meta, events);
  }
  std::optional<Block> alloc(uint64_t size, StreamIndex stream = 0) {
    return policy->allocate(AllocRequest{0, size, stream, next_index++});
  }
  Block must_alloc(uint64_t size, StreamIndex stream = 0) {
    auto b = alloc(size, stream);
    REQUIRE(b);
    REQUIRE(b->size >= size);
    REQUIRE(device.is_backed(b->addr, b->size));
    return *b;
  }
  void free(const Block& b) {
    ++next_index;
    policy->deallocate(b);
  }
};

}  // namespace

TEST_CASE("alias_pages maps pages twice and counts them once", "[framework]") {
  SimDevice sim;
  TrackingDevice dev(sim);
  Device& d = dev.device();
  const uint64_t g = d.granularity();
  Addr a = *d.reserve_range(4 * g);
  Addr b = *d.reserve_range(4 * g);
  REQUIRE(d.map_pages(a, g, 0));
  REQUIRE(d.map_pages(a + 2 * g, g, 0));  // two non-contiguous physical chunks
  REQUIRE(dev.reserved_bytes() == 2 * g);
  REQUIRE(d.alias_pages(b, a, g));
  REQUIRE(d.alias_pages(b + g, a + 2 * g, g));
  CHECK(dev.reserved_bytes() == 2 * g);
  CHECK(sim.reserved_bytes() == 2 * g);
  CHECK(dev.counts().aliases == 2);
  CHECK(dev.is_backed(b, 2 * g));  // the stitched range is one contiguous block
  // Unmapping the original keeps the pages: the alias still maps them.
  d.unmap_pages(a, g);
  CHECK(sim.reserved_bytes() == 2 * g);
  CHECK(dev.reserved_bytes() == 2 * g);
  // The last mapping frees them.
  d.unmap_pages(b, 2 * g);
  CHECK(sim.reserved_bytes() == g);
  CHECK(dev.reserved_bytes() == g);
  d.unmap_pages(a + 2 * g, g);
  CHECK(dev.reserved_bytes() == 0);
  d.release_range(a, 4 * g);
  d.release_range(b, 4 * g);
}

TEST_CASE("alias_pages rejects misuse and costs no capacity", "[framework]") {
  SimDeviceConfig config;
  config.capacity = 4ull << 20;
  SimulatedGpu sim(config);
  TrackingDevice dev(sim);
  Device& d = dev.device();
  const uint64_t g = d.granularity();
  Addr a = *d.reserve_range(2 * g);
  Addr b = *d.reserve_range(2 * g);
  REQUIRE(d.map_pages(a, 2 * g, 0));
  CHECK_FALSE(d.map_pages(b, g, 0));                             // full
  CHECK(d.alias_pages(b, a, 2 * g));                             // but aliasing needs no new memory
  CHECK_THROWS_AS(d.alias_pages(b, a, g), std::logic_error);     // already mapped there
  CHECK_THROWS_AS(d.release_range(b, 2 * g), std::logic_error);  // still mapped
  // A partial unmap of the alias splits it.
  d.unmap_pages(b + g, g);
  CHECK(dev.is_backed(b, g));
  CHECK_FALSE(dev.is_backed(b + g, 1));
  d.unmap_pages(b, g);
  d.unmap_pages(a, 2 * g);
  CHECK(sim.device().reserved_bytes() == 0);
  Addr c = *sim.device().reserve_range(g);
  CHECK_THROWS_AS(sim.device().alias_pages(c, a, g), std::logic_error);  // source not mapped
}

// SimDevice keeps mapped runs per range and mapping counts per physical allocation: pieces of
// one allocation shown twice in the same range, unmapped piecemeal, free exactly their pages.
TEST_CASE("SimDevice: mapping counts per physical piece through partial unmaps and aliases", "[framework]") {
  SimDevice sim;
  const uint64_t g = sim.granularity();
  Addr r = *sim.reserve_range(8 * g);
  REQUIRE(sim.map_pages(r, 3 * g, 0));            // one physical allocation of 3 pages
  REQUIRE(sim.alias_pages(r + 4 * g, r, 3 * g));  // shown again in the same range
  CHECK(sim.reserved_bytes() == 3 * g);
  sim.unmap_pages(r + g, g);  // the original's middle page: the alias keeps it
  CHECK(sim.reserved_bytes() == 3 * g);
  CHECK_THROWS_AS(sim.unmap_pages(r, 2 * g), std::logic_error);       // r + g is a hole now
  CHECK_THROWS_AS(sim.map_pages(r + 2 * g, g, 0), std::logic_error);  // still mapped
  sim.unmap_pages(r + 5 * g, 2 * g);  // the alias's last two pages: the middle one had no other mapping
  CHECK(sim.reserved_bytes() == 2 * g);
  sim.unmap_pages(r, g);
  CHECK(sim.reserved_bytes() == 2 * g);  // the alias at r + 4g still shows it
  sim.unmap_pages(r + 4 * g, g);
  CHECK(sim.reserved_bytes() == g);
  CHECK_THROWS_AS(sim.release_range(r, 8 * g), std::logic_error);  // r + 2g is mapped
  sim.unmap_pages(r + 2 * g, g);
  CHECK(sim.reserved_bytes() == 0);
  REQUIRE(sim.map_pages(r + 7 * g, g, 0));  // a new allocation (in the freed one's slot)
  CHECK(sim.reserved_bytes() == g);
  sim.unmap_pages(r + 7 * g, g);
  sim.release_range(r, 8 * g);
  CHECK(sim.reserved_bytes() == 0);
}

TEST_CASE("alias_pages is logged with its source", "[framework]") {
  SimDevice sim;
  CallLogDevice dev(sim);
  const uint64_t g = dev.granularity();
  Addr a = *dev.reserve_range(g);
  Addr b = *dev.reserve_range(g);
  REQUIRE(dev.map_pages(a, g, 0));
  REQUIRE(dev.alias_pages(b, a, g));
  REQUIRE(dev.calls().size() == 2);
  CHECK(dev.calls()[1].kind == EventKind::SegmentMap);
  CHECK(dev.calls()[1].addr == b);
  CHECK(dev.calls()[1].alias_of == a);
  CHECK(dev.calls()[0].alias_of == 0);
}

namespace fraglab {
int bfc_bin_for_size(uint64_t bytes);
}

TEST_CASE("bfc: bins by power of two from 256 B", "[framework]") {
  CHECK(bfc_bin_for_size(1) == 0);
  CHECK(bfc_bin_for_size(256) == 0);
  CHECK(bfc_bin_for_size(511) == 0);
  CHECK(bfc_bin_for_size(512) == 1);
  CHECK(bfc_bin_for_size(1 * kMiB) == 12);
  CHECK(bfc_bin_for_size(256ull << 20) == 20);
  CHECK(bfc_bin_for_size(64 * kGiB) == 20);  // the last bin takes everything larger
  CHECK(find_policy("bfc")->alignment == 256);
}

TEST_CASE("bfc: 256 B rounding, split rule and doubling regions", "[framework]") {
  Bench b("bfc");
  Block small = b.must_alloc(100);
  CHECK(small.size == 256);                      // split: the 2 MiB region is >= 2x the request
  CHECK(b.device.reserved_bytes() == 2 * kMiB);  // the first region is 2 MiB
  Block mid = b.must_alloc(3 * kMiB);
  CHECK(b.device.reserved_bytes() == 6 * kMiB);  // the next region doubled to 4 MiB
  CHECK(mid.size == 4 * kMiB);                   // 4 MiB < 2 x 3 MiB and 1 MiB < 128 MiB: not split
  b.must_alloc(20 * kMiB);
  CHECK(b.device.reserved_bytes() == 38 * kMiB);  // 8 MiB doubled until it fits: 32 MiB
  // A freed chunk coalesces with its free neighbour: the whole 2 MiB region is one chunk again.
  b.free(small);
  Block again = b.must_alloc(2 * kMiB);
  CHECK(again.addr == small.addr);
  CHECK(b.device.counts().segment_allocs == 3);
}

TEST_CASE("bfc: splits a remainder of 128 MiB or more", "[framework]") {
  Bench b("bfc:allow_growth=false,memory_limit=1GiB");
  CHECK(b.device.reserved_bytes() == 0);
  Block big = b.must_alloc(700 * kMiB);
  CHECK(b.device.reserved_bytes() == kGiB);  // one region of memory_limit
  CHECK(big.size == 700 * kMiB);             // 324 MiB left over >= 128 MiB: split
  b.free(big);
  Block fit = b.must_alloc(900 * kMiB);
  CHECK(fit.size == kGiB);  // 124 MiB left over: kept as padding
}

TEST_CASE("bfc: garbage collection frees idle regions to fit a request", "[framework]") {
  SimDeviceConfig config;
  config.capacity = 64 * kMiB;
  Bench b("bfc", config);
  Block a = b.must_alloc(30 * kMiB);  // regions: 32 MiB
  b.free(a);
  // 40 MiB fits neither the free 32 MiB region nor beside it; GC frees it and retries.
  Block c = b.must_alloc(40 * kMiB);
  CHECK(b.device.counts().segment_frees == 1);
  CHECK(b.device.reserved_bytes() <= 64 * kMiB);
  (void)c;
  Bench no_gc("bfc:garbage_collection=false", config);
  no_gc.free(no_gc.must_alloc(30 * kMiB));
  CHECK_FALSE(no_gc.alloc(40 * kMiB));
}

namespace {

// A random trace: allocations of log-uniform sizes on several streams, freed in random order.
Trace random_trace(uint32_t seed, size_t allocs, uint64_t max_size = 64 * kMiB) {
  std::mt19937_64 rng(seed);
  Trace t;
  t.meta.streams = {0, 1, 2, 3};
  IdSlots ids;
  std::vector<AllocId> live;
  std::uniform_real_distribution<double> log_size(0.0, std::log2(static_cast<double>(max_size)));
  size_t made = 0;
  while (made < allocs || !live.empty()) {
    bool alloc = made < allocs && (live.empty() || rng() % 100 < 55);
    Event e;
    if (alloc) {
      e.kind = EventKind::Alloc;
      e.id = ids.acquire();
      e.size = static_cast<uint64_t>(std::exp2(log_size(rng)));
      e.stream = static_cast<StreamIndex>(rng() % 4);
      live.push_back(e.id);
      ++made;
    } else {
      size_t k = rng() % live.size();
      e.kind = EventKind::Free;
      e.id = live[k];
      live[k] = live.back();
      live.pop_back();
      ids.release(e.id);
    }
    e.time_us = static_cast<int64_t>(t.events.size());
    t.events.push_back(e);
  }
  return t;
}

ReplayResult replay_checked(const Trace& t, const std::string& policy, SimDeviceConfig config = {}) {
  MemorySource source(t);
  ReplayOptions options;
  options.check_invariants = true;
  return replay_simulated(source, PolicySpec::parse(policy), config, options, &t.events);
}

}  // namespace

TEST_CASE("oracle: never overlaps, peak between the live bound and best fit", "[framework]") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    Trace t = random_trace(seed, 400);
    ReplayResult oracle = replay_checked(t, "oracle");  // check_invariants: no overlap, inside the segment
    ReplayResult best = replay_checked(t, "bestfit");
    INFO("seed " << seed);
    REQUIRE(oracle.ooms.empty());
    CHECK(oracle.reserved.bytes == *oracle.oracle_bound);
    CHECK(oracle.reserved.bytes >= oracle.live_bytes_bound);
    CHECK(oracle.reserved.bytes <= best.reserved.bytes);
    CHECK(oracle.calls.segment_allocs == 1);
    CHECK(best.gap_to_oracle().has_value());
  }
}

TEST_CASE("replay results carry both bounds", "[framework]") {
  Trace t = random_trace(7, 200);
  ReplayResult r = replay_checked(t, "bfc");
  TraceBounds b = compute_bounds(t.events);
  CHECK(r.live_bytes_bound == b.live_bytes);
  CHECK(r.live_bytes_bound == r.requested.bytes);  // nothing failed
  REQUIRE(r.oracle_bound);
  CHECK(*r.oracle_bound == *b.oracle);
  CHECK(r.gap_to_live_bound() == static_cast<int64_t>(r.reserved.bytes - b.live_bytes));
  CHECK(*r.oracle_bound >= b.live_bytes);
  // Without the trace in memory the live bound still comes from the replay itself.
  MemorySource source(t);
  ReplayResult streamed = replay_simulated(source, PolicySpec::parse("bfc"), {}, {});
  CHECK(streamed.live_bytes_bound == b.live_bytes);
  CHECK_FALSE(streamed.oracle_bound);
}

TEST_CASE("rmm_pool: grows by max(request, pool size), halfway to a maximum", "[framework]") {
  Bench b("rmm_pool");
  b.must_alloc(kMiB);
  CHECK(b.device.reserved_bytes() == kMiB);
  b.must_alloc(kMiB);
  CHECK(b.device.reserved_bytes() == 2 * kMiB);  // max(1 MiB, 1 MiB)
  b.must_alloc(3 * kMiB);
  CHECK(b.device.reserved_bytes() == 5 * kMiB);  // max(3 MiB, 2 MiB)
  Block small = b.must_alloc(100);
  CHECK(small.size == 256);
  CHECK(b.device.reserved_bytes() == 10 * kMiB);  // max(256 B, 5 MiB): doubling

  Bench capped("rmm_pool:initial_size=2MiB,maximum_size=8MiB");
  capped.must_alloc(2 * kMiB);
  CHECK(capped.device.reserved_bytes() == 2 * kMiB);  // the initial pool
  capped.must_alloc(kMiB);
  CHECK(capped.device.reserved_bytes() == 5 * kMiB);  // half of the 6 MiB left
  capped.must_alloc(2 * kMiB);                        // fits the 2 MiB left in that growth
  CHECK(capped.device.reserved_bytes() == 5 * kMiB);
  capped.must_alloc(2 * kMiB);
  CHECK(capped.device.reserved_bytes() == 7 * kMiB);  // max(2 MiB, 3 MiB / 2)
  CHECK(capped.alloc(2 * kMiB) == std::nullopt);      // 1 MiB left: maximum_size reached
}

TEST_CASE("rmm_pool: per-stream free lists, other streams' blocks before growing", "[framework]") {
  Bench b("rmm_pool:initial_size=4MiB");
  Block x = b.must_alloc(kMiB, 0);
  Block y = b.must_alloc(kMiB, 0);
  b.free(x);
  // Stream 0's own freed block is reused first (best fit among its list).
  Block z = b.must_alloc(kMiB, 0);
  CHECK(z.addr == x.addr);
  b.free(z);
  // Stream 1 has no list: it takes stream 0's best fit before asking the device.
  Block w = b.must_alloc(kMiB, 1);
  CHECK(w.addr == x.addr);
  CHECK(b.device.counts().segment_allocs == 1);
  b.free(w);
  b.free(y);
  // Blocks in different streams' lists do not merge until a miss merges the lists.
  Block big = b.must_alloc(4 * kMiB, 1);
  CHECK(b.device.counts().segment_allocs == 1);
  CHECK(big.size == 4 * kMiB);
  b.free(big);
  b.policy->empty_cache();
  CHECK(b.device.reserved_bytes() == 0);
}

TEST_CASE("cupy: 512 B rounding, exact cudaMalloc, per-stream bins, split and merge", "[framework]") {
  Bench b("cupy");
  Block a = b.must_alloc(1000);
  CHECK(a.size == 1024);
  CHECK(b.device.reserved_bytes() == 1024);  // cudaMalloc of exactly the rounded size
  Block big = b.must_alloc(4096, 0);
  b.free(big);
  // Another stream cannot use stream 0's free chunk: it mallocs.
  Block other = b.must_alloc(4096, 1);
  CHECK(other.addr != big.addr);
  CHECK(b.device.counts().segment_allocs == 3);
  // The same stream splits it: 1024 B from the 4096 B chunk, the rest stays free.
  Block part = b.must_alloc(600, 0);
  CHECK(part.addr == big.addr);
  CHECK(part.size == 1024);
  Block rest = b.must_alloc(3072, 0);
  CHECK(rest.addr == big.addr + 1024);
  CHECK(b.device.counts().segment_allocs == 3);
  // Freed halves merge back into the whole allocation, which free_all_blocks returns.
  b.free(part);
  b.free(rest);
  b.policy->empty_cache();
  CHECK(b.device.reserved_bytes() == 1024 + 4096);
}

TEST_CASE("cupy: free_all_blocks then retry on out of memory; limit fails first", "[framework]") {
  SimDeviceConfig config;
  config.capacity = 8 * kMiB;
  Bench b("cupy", config);
  b.free(b.must_alloc(6 * kMiB));
  Block c = b.must_alloc(4 * kMiB, 1);  // stream 1 cannot reuse: malloc fails, the cache goes, retry
  CHECK(b.device.counts().segment_frees == 1);
  CHECK(c.size == 4 * kMiB);
  Bench limited("cupy:limit=4MiB");
  CHECK(limited.alloc(5 * kMiB) == std::nullopt);
  CHECK(limited.device.counts().failed == 0);  // the limit refuses before cudaMalloc
}

TEST_CASE("cuda_async: granules mapped under blocks, release threshold, trim", "[framework]") {
  Bench b("cuda_async");
  Block x = b.must_alloc(3 * kMiB);
  CHECK(b.device.reserved_bytes() == 4 * kMiB);  // two 2 MiB granules
  CHECK(b.device.counts().maps == 1);
  b.free(x);
  CHECK(b.device.reserved_bytes() == 0);  // threshold 0: the free returns its pages

  Bench kept("cuda_async:release_threshold=64MiB");
  Block y = kept.must_alloc(30 * kMiB);
  kept.free(y);
  CHECK(kept.device.reserved_bytes() == 30 * kMiB);  // under the threshold: stays mapped
  Block z = kept.must_alloc(30 * kMiB);
  CHECK(z.addr == y.addr);
  CHECK(kept.device.counts().maps == 1);  // reused without mapping
  Block w = kept.must_alloc(40 * kMiB);
  kept.free(z);
  kept.free(w);
  CHECK(kept.device.reserved_bytes() <= 64 * kMiB);  // above the threshold: released down to it
  kept.policy->empty_cache();                        // cudaMemPoolTrimTo(0)
  CHECK(kept.device.reserved_bytes() == 0);
}

TEST_CASE("cuda_async: cross-stream reuse waits for the free's event", "[framework]") {
  Bench b("cuda_async:release_threshold=1GiB,internal_dependencies=false,event_lag=1");
  Block x = b.must_alloc(8 * kMiB, 0);
  b.free(x);
  // Stream 1 may not reuse it yet: stream 0 has issued nothing since the free.
  Block y = b.must_alloc(8 * kMiB, 1);
  CHECK(y.addr != x.addr);
  // Once stream 0 moves on, the free's event has completed.
  Block s0 = b.must_alloc(512, 0);
  Block z = b.must_alloc(4 * kMiB, 1);
  CHECK(z.addr >= x.addr);
  CHECK(z.addr < x.addr + 8 * kMiB);
  (void)s0;
  // With internal dependencies (the default) the driver reuses it at once.
  Bench d("cuda_async:release_threshold=1GiB");
  Block p = d.must_alloc(8 * kMiB, 0);
  d.free(p);
  CHECK(d.must_alloc(8 * kMiB, 1).addr == p.addr);
}

namespace {
const char* const kFrameworkPolicies[] = {"bfc",    "rmm_pool",  "cupy",        "cuda_async",
                                          "gmlake", "rmm_arena", "rmm_binning", "oracle"};

Trace with_empty_caches(Trace t, uint32_t seed) {
  std::mt19937 rng(seed);
  Trace out;
  out.meta = t.meta;
  for (const Event& e : t.events) {
    out.events.push_back(e);
    if (rng() % 200 == 0) {
      Event ec;
      ec.kind = EventKind::EmptyCache;
      out.events.push_back(ec);
    }
  }
  Event ec;
  ec.kind = EventKind::EmptyCache;
  out.events.push_back(ec);
  return out;
}
}  // namespace

TEST_CASE("framework policies: invariants on random traces, with and without a capacity", "[framework]") {
  for (const char* policy : kFrameworkPolicies) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      Trace t = with_empty_caches(random_trace(seed, 300, seed % 2 ? 64 * kMiB : 512 * kMiB), seed);
      INFO(policy << " seed " << seed);
      SimDeviceConfig config;
      if (seed > 3) config.capacity = 256 * kMiB;  // forces failures and recovery paths
      MemorySource source(t);
      ReplayOptions options;
      options.check_invariants = true;
      options.on_oom = OnOom::Skip;
      ReplayResult r = replay_simulated(source, PolicySpec::parse(policy), config, options, &t.events);
      CHECK(r.final_allocated == 0);
      CHECK(r.final_reserved == 0);  // everything freed, then empty_cache: nothing held
      if (!config.capacity) CHECK(r.ooms.empty());
      if (config.capacity) CHECK(r.reserved.bytes <= *config.capacity);
      MemorySource again(t);
      ReplayResult r2 = replay_simulated(again, PolicySpec::parse(policy), config, options, &t.events);
      CHECK(r2.reserved.bytes == r.reserved.bytes);  // deterministic
      CHECK(r2.calls.total() == r.calls.total());
    }
  }
}

TEST_CASE("gmlake: stitches free chunks into one block without new physical memory", "[framework]") {
  Bench b("gmlake");
  Block a = b.must_alloc(4 * kMiB);
  Block mid = b.must_alloc(2 * kMiB);
  Block c = b.must_alloc(3 * kMiB + 5);  // rounds up to 4 MiB of 2 MiB chunks
  CHECK(c.size == 4 * kMiB);
  CHECK(b.device.reserved_bytes() == 10 * kMiB);
  b.free(a);
  b.free(c);
  // 8 MiB fits no free chunk run, but the two free 4 MiB pBlocks together hold it.
  Block s = b.must_alloc(8 * kMiB);
  CHECK(s.size == 8 * kMiB);
  CHECK(b.device.reserved_bytes() == 10 * kMiB);  // no new physical memory
  CHECK(b.device.counts().maps == 3);
  CHECK(b.device.counts().aliases == 2);
  CHECK(b.device.is_backed(s.addr, s.size));  // one contiguous virtual block
  CHECK((s.addr + s.size <= a.addr || s.addr >= a.addr + a.size));
  // Freed and asked again: the cached sBlock is reused whole, no new stitching.
  b.free(s);
  Block s2 = b.must_alloc(8 * kMiB);
  CHECK(s2.addr == s.addr);
  CHECK(b.device.counts().aliases == 2);
  // Its pBlocks are busy now: a new request needs new memory.
  b.must_alloc(4 * kMiB);
  CHECK(b.device.reserved_bytes() == 14 * kMiB);
  (void)mid;
}

TEST_CASE("gmlake: only the uncovered remainder is new memory; empty_cache returns all", "[framework]") {
  Bench b("gmlake");
  Block a = b.must_alloc(6 * kMiB);
  Block keep = b.must_alloc(2 * kMiB);
  b.free(a);
  Block big = b.must_alloc(10 * kMiB);  // 6 MiB free + 4 MiB new, stitched
  CHECK(b.device.reserved_bytes() == 12 * kMiB);
  CHECK(b.device.counts().aliases == 2);
  b.free(big);
  b.free(keep);
  b.must_alloc(100);  // the small pool: one 2 MiB segment
  CHECK(b.device.counts().segment_allocs == 1);
  b.policy->empty_cache();
  CHECK(b.device.reserved_bytes() == 2 * kMiB);  // only the live small block's segment stays
}

// release_cache (malloc's retry, empty_cache) kept a cached sBlock whose other part was in use and unmapped
// its free part: freeing the used part handed the dead pBlock back as free, and a later stitch aliased
// pages no longer mapped (device misuse, exit 3). Real snapshots under a capacity reach that retry.
TEST_CASE("gmlake: the pBlocks release_cache returns take their cached sBlocks with them", "[framework]") {
  const std::string cases = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/";
  // Each at 90% of its recorded peak: malloc's retries release the cache.
  for (auto [file, capacity] :
       {std::pair{"resnet50_train.default.pickle.gz", 6141719347ull},
        std::pair{"side_stream_prefetch.garbage_collection_threshold-0.5_cap0.0375.pickle.gz", 1542035865ull}}) {
    INFO(file);
    Trace t = load_trace(cases + file);
    SimDeviceConfig config;
    config.capacity = capacity;
    MemorySource source(t);
    ReplayOptions options;
    options.check_invariants = true;
    options.on_oom = OnOom::Skip;
    ReplayResult r;
    REQUIRE_NOTHROW(r = replay_simulated(source, PolicySpec::parse("gmlake"), config, options, &t.events));
    CHECK(r.reserved.bytes <= *config.capacity);
  }
}

TEST_CASE("rmm_arena: per-stream arenas hold their superblocks; large requests go global", "[framework]") {
  Bench b("rmm_arena:arena_size=4MiB");
  Block a = b.must_alloc(1000, 0);
  CHECK(a.size == 1024);
  CHECK(b.device.reserved_bytes() == 4 * kMiB);  // the whole arena at once
  Block c = b.must_alloc(1000, 1);
  CHECK(c.addr == a.addr + kMiB);  // stream 1's arena got the next superblock
  b.free(a);
  Block c2 = b.must_alloc(1000, 1);
  CHECK(c2.addr == c.addr + 1024);  // stream 1 stays in its own superblock
  Block a2 = b.must_alloc(1000, 0);
  CHECK(a2.addr == a.addr);               // stream 0's superblock is still its own
  Block big = b.must_alloc(2 * kMiB, 0);  // > 1 MiB: straight from the global arena
  CHECK(big.addr == a.addr + 2 * kMiB);
  b.free(a2);
  b.free(c);
  b.free(c2);
  b.free(big);
  // 3 MiB needs the superblocks the arenas still hold: the first try fails, defragment()
  // returns them to the global arena, they coalesce and the retry fits.
  Block huge = b.must_alloc(3 * kMiB, 2);
  CHECK(huge.addr == a.addr);
  b.free(huge);
  b.policy->empty_cache();
  CHECK(b.device.reserved_bytes() == 0);
}

TEST_CASE("rmm_binning: power-of-two bins in 128-block chunks from the pool, FIFO reuse", "[framework]") {
  Bench b("rmm_binning");
  Block x = b.must_alloc(1000, 1);
  CHECK(x.size == 256 * 1024);  // the 2^18 bin
  // RMM's constructor gives every bin its first chunk of 128 blocks, smallest bin first, on the
  // default stream, from a pool that grows by max(request, pool size): 32, 64, 128, 256 and
  // 512 MiB, each an upstream block of its own.
  CHECK(b.device.reserved_bytes() == 992 * kMiB);
  CHECK(b.device.counts().segment_allocs == 5);
  Block y = b.must_alloc(200 * 1024, 0);
  CHECK(y.addr == x.addr + 256 * 1024);  // stream 1 took the default stream's first block
  Block z = b.must_alloc(3 * kMiB);
  CHECK(z.size == 4 * kMiB);  // the 2^22 bin's chunk is already there
  CHECK(b.device.counts().segment_allocs == 5);
  Block big = b.must_alloc(5 * kMiB);  // above the bins: the pool itself, grown by its size
  CHECK(big.size == 5 * kMiB);
  CHECK(b.device.reserved_bytes() == 2 * 992 * kMiB);
  b.free(x);
  Block w = b.must_alloc(1000, 1);
  CHECK(w.addr == x.addr);  // stream 1's own list (its free) comes before the default stream's
  b.free(w);
  w = b.must_alloc(1000, 0);
  CHECK(w.addr == y.addr + 256 * 1024);  // FIFO on the default stream: the next unused block
  b.free(w);
  b.free(y);
  b.free(z);
  b.free(big);
  b.policy->empty_cache();
  CHECK(b.device.reserved_bytes() == 0);
}

TEST_CASE("peer models name the real allocator version they were checked against", "[framework]") {
  // tools/peers replays each of these beside the real allocator (docs/peers.md); `fraglab
  // policies` prints what it was checked against, a version included.
  for (const char* name : {"rmm_pool", "rmm_arena", "rmm_binning", "cuda_async", "cupy", "bfc"}) {
    INFO(name);
    const PolicyInfo* info = find_policy(name);
    REQUIRE(info != nullptr);
    const std::string& what = info->checked_against;
    bool has_version = false;
    for (size_t i = 0; i + 2 < what.size(); ++i)
      has_version |= std::isdigit(static_cast<unsigned char>(what[i])) && what[i + 1] == '.' &&
                     std::isdigit(static_cast<unsigned char>(what[i + 2]));
    CHECK(has_version);
  }
  CHECK(find_policy("bestfit")->checked_against.empty());  // a textbook policy has no peer
}
