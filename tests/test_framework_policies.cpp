// Framework allocators (BFC, RMM, CuPy, cudaMallocAsync, GMLake, oracle) and the
// alias_pages device extension: behaviour the modelled sources define.
#include <catch2/catch.hpp>

#include <random>

#include "allocators/registry.h"
#include "sim/replay.h"
#include "sim/sim_device.h"
#include "sim/tracking_device.h"

using namespace fraglab;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// A policy on a tracked simulated device, driven by hand.
struct Bench {
  SimDevice sim;
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
  const uint64_t g = dev.granularity();
  Addr a = *dev.reserve_range(4 * g);
  Addr b = *dev.reserve_range(4 * g);
  REQUIRE(dev.map_pages(a, g, 0));
  REQUIRE(dev.map_pages(a + 2 * g, g, 0));  // two non-contiguous physical chunks
  REQUIRE(dev.reserved_bytes() == 2 * g);
  REQUIRE(dev.alias_pages(b, a, g));
  REQUIRE(dev.alias_pages(b + g, a + 2 * g, g));
  CHECK(dev.reserved_bytes() == 2 * g);
  CHECK(sim.reserved_bytes() == 2 * g);
  CHECK(dev.counts().aliases == 2);
  CHECK(dev.is_backed(b, 2 * g));  // the stitched range is one contiguous block
  // Unmapping the original keeps the pages: the alias still maps them.
  dev.unmap_pages(a, g);
  CHECK(sim.reserved_bytes() == 2 * g);
  CHECK(dev.reserved_bytes() == 2 * g);
  // The last mapping frees them.
  dev.unmap_pages(b, 2 * g);
  CHECK(sim.reserved_bytes() == g);
  CHECK(dev.reserved_bytes() == g);
  dev.unmap_pages(a + 2 * g, g);
  CHECK(dev.reserved_bytes() == 0);
  dev.release_range(a, 4 * g);
  dev.release_range(b, 4 * g);
}

TEST_CASE("alias_pages rejects misuse and costs no capacity", "[framework]") {
  SimDeviceConfig config;
  config.capacity = 4ull << 20;
  SimDevice sim(config);
  TrackingDevice dev(sim);
  const uint64_t g = dev.granularity();
  Addr a = *dev.reserve_range(2 * g);
  Addr b = *dev.reserve_range(2 * g);
  REQUIRE(dev.map_pages(a, 2 * g, 0));
  CHECK_FALSE(dev.map_pages(b, g, 0));  // full
  CHECK(dev.alias_pages(b, a, 2 * g));   // but aliasing needs no new memory
  CHECK_THROWS_AS(dev.alias_pages(b, a, g), std::logic_error);   // already mapped there
  CHECK_THROWS_AS(dev.release_range(b, 2 * g), std::logic_error);  // still mapped
  // A partial unmap of the alias splits it.
  dev.unmap_pages(b + g, g);
  CHECK(dev.is_backed(b, g));
  CHECK_FALSE(dev.is_backed(b + g, 1));
  dev.unmap_pages(b, g);
  dev.unmap_pages(a, 2 * g);
  CHECK(sim.reserved_bytes() == 0);
  Addr c = *sim.reserve_range(g);
  CHECK_THROWS_AS(sim.alias_pages(c, a, g), std::logic_error);  // source not mapped
}

TEST_CASE("alias_pages is logged with its source", "[framework]") {
  SimDevice sim;
  TrackingDevice dev(sim);
  dev.enable_call_log(true);
  const uint64_t g = dev.granularity();
  Addr a = *dev.reserve_range(g);
  Addr b = *dev.reserve_range(g);
  REQUIRE(dev.map_pages(a, g, 0));
  REQUIRE(dev.alias_pages(b, a, g));
  REQUIRE(dev.call_log().size() == 2);
  CHECK(dev.call_log()[1].kind == EventKind::SegmentMap);
  CHECK(dev.call_log()[1].addr == b);
  CHECK(dev.call_log()[1].alias_of == a);
  CHECK(dev.call_log()[0].alias_of == 0);
}
