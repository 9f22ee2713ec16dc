// The device adaptors one job each (device/): StatisticsDevice counts, PhysicalMapDevice knows where
// memory is, CallLogDevice logs, TrackingDevice composes the first two; PlacingDevice places at an
// address (SimDevice, both address models) and HintedDevice replays a recording's addresses through
// it; TieredMap, the ordered map under all of them, against std::map.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "device/call_log_device.h"
#include "device/cuda_address_space.h"
#include "device/hinted_device.h"
#include "device/limiting_device.h"
#include "device/physical_map_device.h"
#include "device/sim_device.h"
#include "device/statistics_device.h"
#include "device/tiered_map.h"
#include "device/tracking_device.h"

using namespace fraglab;

namespace {
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;
}  // namespace

TEST_CASE("TieredMap keeps std::map's order through random inserts and erases", "[device]") {
  TieredMap<uint64_t, uint64_t, 8> map;  // small leaves: many splits and merges
  std::map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(7);
  for (int step = 0; step < 20000; ++step) {
    uint64_t key = rng() % 3000;
    switch (rng() % 4) {
      case 0:
      case 1:
        CHECK(map.emplace(key, step) == ref.emplace(key, step).second);
        break;
      case 2: {  // erase through an iterator: the returned one is the next entry
        auto it = map.lower_bound(key);
        auto rit = ref.lower_bound(key);
        REQUIRE((it == map.end()) == (rit == ref.end()));
        if (rit == ref.end()) break;
        auto next = map.erase(it);
        auto rnext = ref.erase(rit);
        REQUIRE((next == map.end()) == (rnext == ref.end()));
        if (rnext != ref.end()) CHECK(next->first == rnext->first);
        break;
      }
      default:
        CHECK(map.erase(key) == ref.erase(key));
    }
    REQUIRE(map.size() == ref.size());
    auto ub = map.upper_bound(key);
    auto rub = ref.upper_bound(key);
    REQUIRE((ub == map.end()) == (rub == ref.end()));
    if (rub != ref.end()) CHECK(ub->first == rub->first);
    if (rub != ref.begin()) CHECK(std::prev(ub)->first == std::prev(rub)->first);
    CHECK((map.find(key) != map.end()) == (ref.count(key) == 1));
  }
  std::vector<std::pair<uint64_t, uint64_t>> forward(map.begin(), map.end());
  CHECK(forward == std::vector<std::pair<uint64_t, uint64_t>>(ref.begin(), ref.end()));
  std::vector<std::pair<uint64_t, uint64_t>> copied{{1, 2}};  // copy_to replaces what was there
  map.copy_to(copied);
  CHECK(copied == forward);
  std::vector<uint64_t> backward;
  for (auto it = map.end(); it != map.begin();) backward.push_back((--it)->first);
  std::vector<uint64_t> rbackward;
  for (auto it = ref.rbegin(); it != ref.rend(); ++it) rbackward.push_back(it->first);
  CHECK(backward == rbackward);
}

// Each layer checks alignment against the granularity it keeps: by mask for a power of two, by
// division otherwise (a SimDeviceConfig may set any granularity).
TEST_CASE("every layer refuses unaligned VMM calls, power-of-two granularity or not", "[device]") {
  for (uint64_t g : {uint64_t{2} << 20, uint64_t{3} << 20}) {
    SimDeviceConfig config;
    config.granularity = config.segment_alignment = g;
    config.addresses = AddressModel::Bump;
    SimDevice sim(config);
    LimitingDevice limited(sim);
    TrackingDevice tracking(limited);
    CallLogDevice log(tracking);
    const Addr at = g * 3000;  // a multiple of either granularity
    for (Device* d :
         {static_cast<Device*>(&sim), static_cast<Device*>(&limited), &tracking.device(), static_cast<Device*>(&log)}) {
      CHECK(d->granularity() == g);
      CHECK_THROWS_AS(d->reserve_range(g + 512), std::logic_error);
      CHECK_THROWS_AS(d->map_pages(at + g / 2, g, 0), std::logic_error);
      CHECK_THROWS_AS(d->map_pages(at, g + 512, 0), std::logic_error);
      CHECK_THROWS_AS(d->unmap_pages(at, g - 512), std::logic_error);
      CHECK_THROWS_AS(d->alias_pages(at, at + 512, g), std::logic_error);
    }
    CHECK_THROWS_AS(sim.reserve_range_at(at + 512, g), std::logic_error);
    REQUIRE(sim.reserve_range_at(at, 4 * g));
    CHECK(log.map_pages(at, 2 * g, 0));
    CHECK(tracking.reserved_bytes() == 2 * g);
    log.unmap_pages(at, 2 * g);
    CHECK(tracking.reserved_bytes() == 0);
    CHECK(log.calls().size() == 2);
  }
}

TEST_CASE("StatisticsDevice counts calls, failures, reserved bytes and their peak", "[device]") {
  SimDevice sim;
  LimitingDevice limit(sim, 8 * MiB);
  StatisticsDevice stats(limit);
  const uint64_t g = stats.granularity();
  Addr s = *stats.allocate_segment(4 * MiB, 0);
  CHECK_FALSE(stats.allocate_segment(6 * MiB, 0));  // past the limit
  Addr r = *stats.reserve_range(4 * g);
  Addr r2 = *stats.reserve_range(g);
  REQUIRE(stats.map_pages(r, g, 0));
  CHECK_FALSE(stats.map_pages(r + g, 2 * g, 0));  // 4 + 2 + 4 MiB: past it
  CHECK(stats.reserved_bytes() == 4 * MiB + g);
  REQUIRE(stats.alias_pages(r2, r, g));  // costs nothing: the same pages
  CHECK(stats.reserved_bytes() == 4 * MiB + g);
  stats.unmap_pages(r, g);  // the alias still shows them
  CHECK(stats.reserved_bytes() == 4 * MiB + g);
  stats.unmap_pages(r2, g);
  stats.free_segment(s, 4 * MiB);
  stats.release_range(r, 4 * g);
  stats.release_range(r2, g);
  CHECK(stats.reserved_bytes() == 0);
  CHECK(stats.peak_reserved() == 4 * MiB + g);
  const DeviceCallCounts& c = stats.counts();
  CHECK(c.segment_allocs == 1);
  CHECK(c.segment_frees == 1);
  CHECK(c.maps == 1);
  CHECK(c.unmaps == 2);
  CHECK(c.reserves == 2);
  CHECK(c.releases == 2);
  CHECK(c.aliases == 1);
  CHECK(c.failed == 2);
  CHECK(c.total() == 10);
}

TEST_CASE("PhysicalMapDevice: pages merge inside a range, segments never, misuse is refused", "[device]") {
  SimDevice sim;
  PhysicalMapDevice map(sim);
  const uint64_t g = map.granularity();
  Addr r = *map.reserve_range(4 * g);
  REQUIRE(map.map_pages(r + g, g, 0));
  REQUIRE(map.map_pages(r, g, 0));  // touches the first: one interval
  REQUIRE(map.physical().size() == 1);
  CHECK(map.physical().begin()->first == r);
  CHECK(map.physical().begin()->second == 2 * g);
  CHECK(map.is_backed(r, 2 * g));
  CHECK_FALSE(map.is_backed(r, 3 * g));
  Addr a = *map.allocate_segment(3 * MiB, 0);
  Addr b = *map.allocate_segment(3 * MiB, 0);
  CHECK(map.physical().size() == 3);
  CHECK_FALSE(map.is_backed(std::min(a, b), 6 * MiB));  // two segments are two intervals
  std::vector<DeviceRegion> regions = map.regions();
  REQUIRE(regions.size() == 3);
  CHECK(std::is_sorted(regions.begin(), regions.end(),
                       [](const DeviceRegion& x, const DeviceRegion& y) { return x.addr < y.addr; }));
  CHECK(std::count_if(regions.begin(), regions.end(), [](const DeviceRegion& x) { return x.is_vmm; }) == 1);
  CHECK_THROWS_WITH(map.map_pages(r + g, g, 0), Catch::Contains("already mapped"));
  CHECK_THROWS_WITH(map.unmap_pages(r + 2 * g, g), Catch::Contains("unmapped"));
  CHECK_THROWS_WITH(map.release_range(r, 4 * g), Catch::Contains("still mapped"));
  Addr r2 = *map.reserve_range(g);
  CHECK_THROWS_WITH(map.alias_pages(r2, a - a % g, g), Catch::Contains("not mapped by map_pages"));
  // Unmapping the middle of an interval leaves its two ends.
  REQUIRE(map.map_pages(r + 2 * g, g, 0));
  map.unmap_pages(r + g, g);
  CHECK(map.is_backed(r, g));
  CHECK(map.is_backed(r + 2 * g, g));
  CHECK_FALSE(map.is_backed(r + g, 1));
  // An alias shows the pages it maps again: the pieces behind it are the source's.
  REQUIRE(map.alias_pages(r2, r + 2 * g, g));
  CHECK(map.is_backed(r2, g));
  std::vector<std::pair<Addr, uint64_t>> pieces;
  map.for_each_physical_piece(r2, g, [&](Addr at, uint64_t size) { pieces.emplace_back(at, size); });
  CHECK(pieces == std::vector<std::pair<Addr, uint64_t>>{{r + 2 * g, g}});
  CHECK(map.aliases().size() == 1);
  map.unmap_pages(r2, g);
  CHECK(map.aliases().empty());
}

TEST_CASE("CallLogDevice logs successful calls in order under the event index it follows", "[device]") {
  SimDevice sim;
  LimitingDevice limit(sim, 4 * MiB);
  CallLogDevice log(limit);
  uint64_t event = 7;
  log.follow(event);
  const uint64_t g = log.granularity();
  Addr s = *log.allocate_segment(2 * MiB, 0);
  CHECK_FALSE(log.allocate_segment(4 * MiB, 0));  // failed: not logged
  event = 9;
  Addr r = *log.reserve_range(2 * g);  // reserving holds no memory: not logged
  REQUIRE(log.map_pages(r, g, 0));
  log.unmap_pages(r, g);
  log.release_range(r, 2 * g);
  log.free_segment(s, 2 * MiB);
  const auto& calls = log.calls();
  REQUIRE(calls.size() == 4);
  CHECK(calls[0].kind == EventKind::SegmentAlloc);
  CHECK(calls[0].event_index == 7);
  CHECK(calls[1].kind == EventKind::SegmentMap);
  CHECK(calls[1].addr == r);
  CHECK(calls[2].kind == EventKind::SegmentUnmap);
  CHECK(calls[3].kind == EventKind::SegmentFree);
  CHECK(calls[3].event_index == 9);
  CHECK(log.take_calls().size() == 4);
}

TEST_CASE("TrackingDevice only composes: the policy's device is statistics over the physical map", "[device]") {
  SimDevice sim;
  TrackingDevice tracking(sim);
  Device& dev = tracking;
  CHECK(&dev == &tracking.device());
  Addr a = *dev.allocate_segment(3 * MiB, 0);
  CHECK(tracking.counts().segment_allocs == 1);
  CHECK(&tracking.counts() == &tracking.stats().counts());
  CHECK(tracking.is_backed(a, 3 * MiB));
  CHECK(&tracking.physical() == &tracking.map().physical());
  CHECK(tracking.reserved_bytes() == 3 * MiB);
  dev.free_segment(a, 3 * MiB);
  CHECK(tracking.physical().empty());
  CHECK(tracking.peak_reserved() == 3 * MiB);
}

TEST_CASE("SimDevice places at an address when the place is free, on both address models", "[device]") {
  for (AddressModel model : {AddressModel::Cuda, AddressModel::Bump}) {
    SimDeviceConfig config;
    config.addresses = model;
    SimDevice sim(config);
    const uint64_t g = sim.granularity();
    const Addr at = 0x200000000000;  // far from where either model starts
    REQUIRE(sim.allocate_segment_at(at, 6 * MiB, 0));
    CHECK_FALSE(sim.allocate_segment_at(at + 4 * MiB, 4 * MiB, 0));  // overlaps it
    CHECK_FALSE(sim.reserve_range_at(at, g));
    CHECK(sim.reserved_bytes() == 6 * MiB);
    REQUIRE(sim.reserve_range_at(at + 8 * g, 4 * g));
    REQUIRE(sim.map_pages(at + 9 * g, g, 0));  // a placed range is a range like any other
    CHECK(sim.reserved_bytes() == 6 * MiB + g);
    CHECK_FALSE(sim.allocate_segment_at(kAddressSpaceEnd - MiB, 2 * MiB, 0));  // past 2^48
    CHECK_THROWS_AS(sim.reserve_range_at(at + 1, g), std::logic_error);        // unaligned
    sim.unmap_pages(at + 9 * g, g);
    sim.release_range(at + 8 * g, 4 * g);
    sim.free_segment(at, 6 * MiB);
    CHECK(sim.reserved_bytes() == 0);
    REQUIRE(sim.allocate_segment_at(at + 4 * MiB, 4 * MiB, 0));  // the place is free again
    sim.free_segment(at + 4 * MiB, 4 * MiB);
  }
}

TEST_CASE("placed addresses are avoided by later placements", "[device]") {
  SECTION("bump: the next address jumps past a placed stretch") {
    SimDeviceConfig config;
    config.addresses = AddressModel::Bump;
    SimDevice sim(config);
    Addr first = *sim.allocate_segment(MiB, 0);
    Addr next = first + 4 * MiB;  // one 2 MiB unit of segment and one of gap
    REQUIRE(sim.allocate_segment_at(next, MiB, 0));
    Addr after = *sim.allocate_segment(MiB, 0);
    CHECK(after >= next + MiB);
    CHECK(after % (2 * MiB) == 0);
  }
  SECTION("cuda: a place inside a chunk's free tail is taken from it") {
    CudaAddressLayout layout;
    layout.context_free.clear();
    CudaAddressSpace space(layout);
    Addr a = *space.place_segment(20 * MiB);  // a 32 MiB chunk, 12 MiB of tail
    REQUIRE(space.place_segment_at(a + 20 * MiB, 2 * MiB));
    CHECK_FALSE(space.place_segment_at(a + 21 * MiB, MiB));
    CHECK(space.place_segment(2 * MiB) == a + 22 * MiB);  // the tail's rest
    space.free_segment(a + 20 * MiB);
    CHECK(space.place_segment(2 * MiB) == a + 20 * MiB);
  }
}

TEST_CASE("HintedDevice places the recording's addresses through any PlacingDevice", "[device]") {
  SimDevice sim(hinted_upstream_config({}));
  const Addr seg = 0x7f0000000000, range = 0x302000000;
  std::vector<Event> events = {
      {EventKind::SegmentAlloc, 0, 0, 20 * MiB, seg, 0, 0, 0},
      {EventKind::SegmentAlloc, 0, 0, 20 * MiB, seg + 20 * MiB, 0, 0, 0},  // the replay will diverge here
      {EventKind::SegmentAlloc, 0, 0, 20 * MiB, seg, 0, 0, 0},             // taken by then: refused
      {EventKind::SegmentMap, 0, 0, 2 * MiB, range, 0, 0, 0},
  };
  HintedDevice hinted(sim, events);
  CHECK(hinted.allocate_segment(20 * MiB, 0) == seg);
  Addr diverged = *hinted.allocate_segment(8 * MiB, 0);  // another size: the upstream's own choice
  CHECK(diverged != seg + 20 * MiB);
  Addr refused = *hinted.allocate_segment(20 * MiB, 0);
  CHECK(refused != seg);
  CHECK(hinted.reserve_range(64 * MiB) == range);
  CHECK(hinted.hints_used() == 2);
  CHECK(sim.reserved_bytes() == 48 * MiB);  // the memory is the upstream's
  REQUIRE(hinted.map_pages(range, 2 * MiB, 0));
  Addr other = *hinted.reserve_range(2 * MiB);  // no hint left
  REQUIRE(hinted.map_pages(other, 2 * MiB, 0));
  CHECK_FALSE(hinted.alias_pages(range + 2 * MiB, other, 2 * MiB));  // a recorded range: never aliased
  CHECK(hinted.reserved_bytes() == 52 * MiB);
  hinted.unmap_pages(range, 2 * MiB);
  hinted.release_range(range, 64 * MiB);
  hinted.free_segment(seg, 20 * MiB);
  CHECK(sim.allocate_segment_at(seg, 20 * MiB, 0));  // given back to the upstream
}

// A range released (every page unmapped) and reserved again at the same base much later, as a Lightning
// run's validate() did after fit's teardown emptied the cache: the new range's hint is the first recorded
// map after the maps the replay has matched, not the next one after the last hint taken (the range's
// second map, long before, which put the model's blocks a page higher).
TEST_CASE("HintedDevice hints a range reserved again from where the replay's maps have reached", "[device]") {
  SimDevice sim(hinted_upstream_config({}));
  const Addr base = 0x7eed82000000;
  std::vector<Event> events = {
      {EventKind::SegmentMap, 0, 0, 140 * MiB, base, 0, 0, 0},
      {EventKind::SegmentMap, 0, 0, 20 * MiB, base + 140 * MiB, 0, 0, 0},
      {EventKind::SegmentUnmap, 0, 0, 160 * MiB, base, 0, 0, 0},
      {EventKind::SegmentMap, 0, 0, 140 * MiB, base, 0, 0, 0},  // the range reserved again
  };
  HintedDevice hinted(sim, events);
  REQUIRE(hinted.reserve_range(GiB) == base);
  REQUIRE(hinted.map_pages(base, 140 * MiB, 0));
  REQUIRE(hinted.map_pages(base + 140 * MiB, 20 * MiB, 0));
  hinted.unmap_pages(base, 160 * MiB);
  hinted.release_range(base, GiB);
  CHECK(hinted.reserve_range(GiB) == base);
  CHECK(hinted.hints_used() == 2);
}
