// The classic policies (firstfit, nextfit, bestfit, worstfit, buddy, tlsf, slab) and the
// shared indexes under allocators/detail: behaviour each design defines, with the
// expected addresses and sizes derived by hand in the comments. Addresses are offsets
// from the first segment the simulated device hands out.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <tuple>

#include "allocators/detail/address_fit_index.h"
#include "allocators/detail/size_bins.h"
#include "allocators/registry.h"
#include "device/sim_device.h"
#include "device/tracking_device.h"

namespace fraglab {
namespace {

constexpr uint64_t KiB = 1ull << 10, MiB = 1ull << 20;

// One policy on a tracked simulated device, driven by hand.
struct Driver {
  SimDevice sim;
  TrackingDevice device{sim};
  TraceMeta meta;
  std::unique_ptr<Policy> policy;
  uint64_t index = 0;
  Addr base = 0;  // the first segment's address

  explicit Driver(const std::string& spec, SimDeviceConfig config = {}) : sim(config) {
    policy = make_policy(PolicySpec::parse(spec), device, meta);
  }
  Block alloc(uint64_t size) {
    auto b = policy->allocate(AllocRequest{0, size, 0, index++});
    REQUIRE(b);
    if (base == 0) base = device.regions().front().addr;
    return *b;
  }
  uint64_t offset(const Block& b) const { return b.addr - base; }
  void free(const Block& b) { policy->deallocate(b); }
};

}  // namespace

// One 2 MiB segment holds A = 1 MiB @0, B = 256 KiB @1 MiB, C = 256 KiB @1.25 MiB,
// D = 512 KiB @1.5 MiB (exactly full). Freeing A and C leaves holes of 1 MiB @0 and
// 256 KiB @1.25 MiB (not adjacent: B lies between). A 256 KiB request then goes:
//   firstfit -> @0 (lowest address that fits), bestfit -> @1.25 MiB (exact fit),
//   worstfit -> @0 (the largest hole).
TEST_CASE("first, best and worst fit choose different holes", "[classic]") {
  auto place = [](const std::string& policy) {
    Driver d(policy);
    Block a = d.alloc(1 * MiB), b = d.alloc(256 * KiB), c = d.alloc(256 * KiB), e = d.alloc(512 * KiB);
    CHECK(d.offset(a) == 0);
    CHECK(d.offset(b) == 1 * MiB);
    CHECK(d.offset(c) == 1 * MiB + 256 * KiB);
    CHECK(d.offset(e) == 1 * MiB + 512 * KiB);
    d.free(a);
    d.free(c);
    uint64_t at = d.offset(d.alloc(256 * KiB));
    CHECK(d.device.counts().segment_allocs == 1);  // served from the holes, no growth
    return at;
  };
  CHECK(place("firstfit") == 0);
  CHECK(place("bestfit") == 1 * MiB + 256 * KiB);
  CHECK(place("worstfit") == 0);
}

// Worst fit takes the largest block even when a small one fits exactly: A = 256 KiB @0,
// B = 256 KiB @256 KiB, the rest (1.5 MiB @512 KiB) free. Free A: holes 256 KiB @0 and
// 1.5 MiB @512 KiB. A 256 KiB request: worstfit -> @512 KiB, bestfit and firstfit -> @0.
TEST_CASE("worstfit carves from the largest free block", "[classic]") {
  for (auto [policy, expected] :
       {std::pair<const char*, uint64_t>{"worstfit", 512 * KiB}, {"bestfit", 0}, {"firstfit", 0}}) {
    Driver d(policy);
    Block a = d.alloc(256 * KiB);
    d.alloc(256 * KiB);
    d.free(a);
    INFO(policy);
    CHECK(d.offset(d.alloc(256 * KiB)) == expected);
  }
}

// Next fit resumes at the rover. Fill the segment with four 512 KiB blocks @0, @512K,
// @1M, @1.5M (rover = 2 MiB, the end). Free the first and third: holes @0 and @1M.
//   E = 256 KiB: nothing at or after the rover -> wrap -> E @0; rover = 256 KiB.
//   free E: it merges with the 256 KiB remainder into a 512 KiB hole @0.
//   F = 256 KiB: nextfit searches from 256 KiB; the hole @0 starts before it, so the
//   next fit is the hole @1M -> F @1 MiB. Firstfit takes @0 again.
TEST_CASE("nextfit resumes the search at its roving pointer", "[classic]") {
  auto place = [](const std::string& policy) {
    Driver d(policy);
    Block b0 = d.alloc(512 * KiB);
    d.alloc(512 * KiB);
    Block b2 = d.alloc(512 * KiB);
    d.alloc(512 * KiB);
    d.free(b0);
    d.free(b2);
    Block e = d.alloc(256 * KiB);
    CHECK(d.offset(e) == 0);
    d.free(e);
    return d.offset(d.alloc(256 * KiB));
  };
  CHECK(place("nextfit") == 1 * MiB);
  CHECK(place("firstfit") == 0);
}

// Split and merge in the shared pool: a freed block merges with both free neighbours, so
// after freeing everything the segment is one free block again. 700K @0, 700K @700K, 600K
// @1400K leave 48K free @2000K; freeing the first and last, then the middle, merges all
// four pieces into 2 MiB @0. A request of 2 MiB - 64 KiB is then served @0 from it (not
// exactly 2 MiB: TLSF rounds a 2 MiB request up past the 2 MiB class, see below), and
// after freeing it empty_cache returns the segment.
TEST_CASE("sequential fits coalesce and return whole segments", "[classic]") {
  for (const char* policy : {"firstfit", "nextfit", "bestfit", "worstfit", "tlsf"}) {
    INFO(policy);
    Driver d(policy);
    Block a = d.alloc(700 * KiB), b = d.alloc(700 * KiB), c = d.alloc(600 * KiB);
    d.free(a);
    d.free(c);
    d.free(b);
    Block whole = d.alloc(2 * MiB - 64 * KiB);
    CHECK(d.offset(whole) == 0);
    CHECK(d.device.counts().segment_allocs == 1);
    d.free(whole);
    d.policy->empty_cache();
    CHECK(d.device.reserved_bytes() == 0);
  }
}

// A remainder below min_split stays with the block: with min_split=64KiB, 2 MiB - 2000 KiB
// = 48 KiB is too small to split off, so the block is the whole 2 MiB segment.
TEST_CASE("min_split keeps small remainders with the block", "[classic]") {
  Driver d("bestfit:min_split=64KiB");
  CHECK(d.alloc(2000 * KiB).size == 2 * MiB);
  Driver e("bestfit");
  CHECK(e.alloc(2000 * KiB).size == 2000 * KiB);
}

// Binary buddy on 1 MiB arenas. A 1000-byte request takes order 10 (1 KiB): the arena is
// halved ten times (512K, 256K, ..., 1K), leaving free buddies of 1K @1K, 2K @2K, 4K @4K,
// ..., 512K @512K; the block is 1 KiB @0. A 3000-byte request takes order 12 (4 KiB):
// the smallest free order >= 12 is exactly the 4K buddy @4K. A 1024-byte request takes the
// 1K buddy @1K. Freeing all three merges every pair back into the 1 MiB arena, so a
// 1 MiB request is served @0 without a second arena, and empty_cache returns it.
TEST_CASE("buddy splits to the request's order and merges buddies back into the arena", "[classic]") {
  Driver d("buddy:arena=1MiB");
  Block a = d.alloc(1000);
  CHECK(d.offset(a) == 0);
  CHECK(a.size == 1024);
  Block b = d.alloc(3000);
  CHECK(d.offset(b) == 4 * KiB);
  CHECK(b.size == 4096);
  Block c = d.alloc(1024);
  CHECK(d.offset(c) == 1 * KiB);
  d.free(a);
  d.free(b);
  d.free(c);
  Block whole = d.alloc(1 * MiB);
  CHECK(d.offset(whole) == 0);
  CHECK(d.device.counts().segment_allocs == 1);
  d.free(whole);
  d.policy->empty_cache();
  CHECK(d.device.reserved_bytes() == 0);
  CHECK(d.device.counts().segment_frees == 1);
}

// Internal fragmentation and oversize requests: 600 KiB rounds up to a 1 MiB block
// (order 20); 3 MiB exceeds the 1 MiB arena and gets its own 4 MiB arena (order 22).
// min_block=4KiB makes a 1-byte request a 4 KiB block.
TEST_CASE("buddy rounds to powers of two and gives oversize requests their own arena", "[classic]") {
  Driver d("buddy:arena=1MiB,min_block=4KiB");
  CHECK(d.alloc(600 * KiB).size == 1 * MiB);
  Block big = d.alloc(3 * MiB);
  CHECK(big.size == 4 * MiB);
  CHECK(d.device.reserved_bytes() == 5 * MiB);
  CHECK(d.alloc(1).size == 4 * KiB);  // a third arena: the first is wholly used
  CHECK(d.device.counts().segment_allocs == 3);
}

// A freed block merges only with its buddy, not with any free neighbour. In a 1 MiB
// arena, 256 KiB requests go: a @0 (1M -> 512K @0 + free 512K @512K -> 256K @0 + free
// 256K @256K), b @256K (the free order-18 block), c @512K (512K @512K halved, its upper
// half 256K @768K free). Free b: its buddy is @0 (0x40000 ^ 0x40000), in use: b stays.
// Free c: its buddy @768K is free, they merge into 512K @512K, whose buddy @0 is not a
// free 512K block: stop. b (@256K) and the merged block (@512K) are adjacent and both
// free, yet separate: a 512 KiB request takes @512K, a 256 KiB one @256K.
TEST_CASE("buddy merges only with the buddy, not any free neighbour", "[classic]") {
  Driver d("buddy:arena=1MiB");
  d.alloc(256 * KiB);
  Block b = d.alloc(256 * KiB), c = d.alloc(256 * KiB);
  CHECK(d.offset(b) == 256 * KiB);
  CHECK(d.offset(c) == 512 * KiB);
  d.free(b);
  d.free(c);
  CHECK(d.offset(d.alloc(512 * KiB)) == 512 * KiB);
  CHECK(d.offset(d.alloc(256 * KiB)) == 256 * KiB);
  CHECK(d.device.counts().segment_allocs == 1);
}

// TLSF classes (align 512, sl_log2 5): below 16 KiB the classes are exact multiples of
// 512; above, [2^f, 2^(f+1)) splits into 32 classes of width 2^(f-5). 100 KiB = 102400
// has f = 16, width 2048, second level (102400 >> 11) - 32 = 18: class [102400, 104448).
// Setup: H = 101 KiB (103424, class 18) @0, a 512-byte guard @103424, the rest of the
// segment (1993216 bytes) free @103936. Free H.
//  - A request of 102912 (100.5 KiB) is rounded up by 2047 before the lookup, into
//    class 19, so TLSF does not take H although H fits: it cuts the big block @103936.
//  - A request of exactly 102400 rounds to 104447, still class 18: H's list, H @0.
// Best fit, for contrast, takes H for 102912.
TEST_CASE("tlsf finds a block in the request's rounded-up class", "[classic]") {
  auto setup = [](Driver& d) {
    Block h = d.alloc(103424);
    Block guard = d.alloc(512);
    CHECK(d.offset(guard) == 103424);
    d.free(h);
  };
  {
    Driver d("tlsf");
    setup(d);
    CHECK(d.offset(d.alloc(102912)) == 103936);
    CHECK(d.offset(d.alloc(102400)) == 0);
    CHECK(d.device.counts().segment_allocs == 1);
  }
  {
    Driver d("bestfit");
    setup(d);
    CHECK(d.offset(d.alloc(102912)) == 0);
  }
  {
    // With sl_log2=1 the classes above 1 KiB are halves of each power of two:
    // 102400 is in [98304, 131072) (f = 16, width 32768, sl 1); rounding by 32767 moves
    // it to [131072, 196608). H (103424) sits in [98304, 131072): skipped, and the big
    // block @103936 is cut instead.
    Driver d("tlsf:sl_log2=1");
    setup(d);
    CHECK(d.offset(d.alloc(102400)) == 103936);
  }
}

// Growth must be found again: 128 MiB + 512 lies in class [128 MiB, 132 MiB) (f = 27,
// width 4 MiB) and is searched for from 132 MiB up. A segment of just the request's size
// rounded to 2 MiB (130 MiB) would, once free, sit in the skipped class and every repeat
// would add a segment; tlsf makes the segment 132 MiB, so the repeat reuses it.
TEST_CASE("tlsf sizes new segments so that the same request finds them again", "[classic]") {
  Driver d("tlsf");
  for (int i = 0; i < 3; ++i) d.free(d.alloc(128 * MiB + 512));
  CHECK(d.device.counts().segment_allocs == 1);
  CHECK(d.device.reserved_bytes() == 132 * MiB);
}

// Small requests below 16 KiB need no rounding: the class is the exact size, so a freed
// 4 KiB block is reused for a 4 KiB request (LIFO within the class).
TEST_CASE("tlsf reuses exact small classes LIFO", "[classic]") {
  Driver d("tlsf");
  Block a = d.alloc(4096), g1 = d.alloc(512), b = d.alloc(4096), g2 = d.alloc(512);
  (void)g1;
  (void)g2;
  d.free(a);
  d.free(b);  // list of class 8 (4096): b, a
  CHECK(d.offset(d.alloc(4096)) == d.offset(b));
  CHECK(d.offset(d.alloc(4096)) == d.offset(a));
}

// jemalloc-style classes with a 512-byte quantum: 1 -> 512, 1536 -> 1536, 2049 -> 2560
// (group (2048, 4096] in steps of 512), 4097 -> 5120 (group (4096, 8192] in steps of
// 1024), 9000 -> 10240 (steps of 2048), 1 MiB -> 1 MiB (the threshold itself is small).
TEST_CASE("slab rounds small requests to jemalloc-style classes", "[classic]") {
  Driver d("slab");
  CHECK(d.alloc(1).size == 512);
  CHECK(d.alloc(1536).size == 1536);
  CHECK(d.alloc(2049).size == 2560);
  CHECK(d.alloc(4097).size == 5120);
  CHECK(d.alloc(9000).size == 10240);
  CHECK(d.alloc(1 * MiB).size == 1 * MiB);
  CHECK(d.device.counts().segment_allocs == 6);  // one slab per class
  // Above the threshold: the best-fit pool, 512-byte granularity, a 2 MiB segment.
  CHECK(d.alloc(1 * MiB + 1).size == 1 * MiB + 512);
  CHECK(d.device.counts().segment_allocs == 7);
}

// Slabs of 4 KiB hold four 1 KiB slots. Five 1000-byte requests fill slab S0 (slots @0,
// @1K, @2K, @3K) and open S1 (its slot 0). Freeing S0's slot @2K makes S0 non-full again;
// the next request goes to the lowest-address non-full slab, S0, and its lowest free slot:
// @2K, not S1's slot 1. When everything is freed, empty_cache returns both slabs.
TEST_CASE("slab fills the lowest slab's lowest free slot", "[classic]") {
  Driver d("slab:slab=4KiB,large_threshold=2KiB");
  std::vector<Block> s0;
  for (int i = 0; i < 4; ++i) s0.push_back(d.alloc(1000));
  for (int i = 0; i < 4; ++i) CHECK(d.offset(s0[i]) == static_cast<uint64_t>(i) * KiB);
  Block s1 = d.alloc(1000);
  CHECK(d.device.counts().segment_allocs == 2);
  Addr s1_base = s1.addr;
  d.free(s0[2]);
  Block again = d.alloc(1000);
  CHECK(d.offset(again) == 2 * KiB);
  CHECK(d.alloc(1000).addr == s1_base + KiB);  // S0 full again: S1's next slot
  d.free(again);
  d.policy->empty_cache();
  CHECK(d.device.counts().segment_frees == 0);  // both slabs still hold live slots
}

TEST_CASE("slab returns empty slabs on empty_cache and keeps used ones", "[classic]") {
  Driver d("slab");
  Block small = d.alloc(700);      // slab of class 1024
  Block other = d.alloc(3000);     // slab of class 3072
  Block large = d.alloc(3 * MiB);  // the pool: a 4 MiB segment (rounded to 2 MiB)
  CHECK(d.device.reserved_bytes() == 2 * MiB + 2 * MiB + 4 * MiB);
  d.free(other);
  d.free(large);
  d.policy->empty_cache();
  CHECK(d.device.reserved_bytes() == 2 * MiB);  // only the slab holding `small`
  d.free(small);
  d.policy->empty_cache();
  CHECK(d.device.reserved_bytes() == 0);
}

// Bad options are configuration errors, not crashes.
TEST_CASE("classic policies reject inconsistent options", "[classic]") {
  SimDevice sim;
  TraceMeta meta;
  for (const char* spec :
       {"buddy:arena=3MiB", "buddy:min_block=1000", "tlsf:sl_log2=7", "tlsf:align=768", "slab:slab=512KiB",
        "bestfit:align=0", "firstfit:segment_round=1000", "slab:large_threshold=256"}) {
    INFO(spec);
    CHECK_THROWS_AS(make_policy(PolicySpec::parse(spec), sim, meta), PolicyConfigError);
  }
}

// The shared indexes against brute force on random operations.
TEMPLATE_TEST_CASE_SIG("SizeBins gives the exact best fit and the largest block", "[classic]",
                       ((detail::BinLayout L), L), detail::BinLayout::Ascending, detail::BinLayout::Descending) {
  std::mt19937_64 rng(42);
  detail::SizeBins<L> bins;
  std::set<std::tuple<uint64_t, Addr, uint32_t>> model;
  std::set<Addr> used;  // addresses stay distinct
  uint32_t next_node = 0;
  Addr last = 0;
  for (int step = 0; step < 20000; ++step) {
    if (model.empty() || rng() % 3 != 0) {
      // Short bins and long ones (64 sizes), and now and then a size near the address space's.
      uint64_t size = (rng() % 4 == 0)    ? 512 * (1 + rng() % 64)
                      : (rng() % 16 == 0) ? 512 * (1 + rng() % (1ull << 38))
                                          : 512 * (1 + rng() % (1u << 20));
      // Anywhere below 2^48 (the device's address space), and a quarter of the time one high bit away
      // from the last.
      Addr addr = 0;
      do {
        addr = (last && rng() % 4 == 0) ? last ^ (uint64_t{1} << (33 + rng() % 15)) : 512 * (rng() % (1ull << 39));
      } while (!used.insert(addr).second);
      last = addr;
      bins.insert(next_node, size, addr);
      model.emplace(size, addr, next_node++);
    } else {
      auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
      bins.erase(std::get<0>(*it), std::get<1>(*it));
      model.erase(it);
    }
    uint64_t want = 512 * (1 + rng() % (1u << 20));
    auto fit = model.lower_bound({want, 0, 0});
    REQUIRE(bins.best_fit(want) == (fit == model.end() ? kNoNode : std::get<2>(*fit)));
    if (rng() % 8 == 0) {  // the allocation path: the best fit found and removed in one search
      want = (rng() % 4 == 0) ? 512 * (1 + rng() % 64) : want;
      fit = model.lower_bound({want, 0, 0});
      REQUIRE(bins.take_best_fit(want) == (fit == model.end() ? kNoNode : std::get<2>(*fit)));
      if (fit != model.end()) model.erase(fit);
      REQUIRE(bins.size() == model.size());
    }
    if (!model.empty()) {
      auto largest = model.lower_bound({std::get<0>(*model.rbegin()), 0, 0});
      REQUIRE(bins.largest() == std::get<2>(*largest));
      REQUIRE(bins.largest_size() == std::get<0>(*largest));
    }
  }
}

TEST_CASE("AddressFitIndex first_fit finds the first large-enough block at or after an address", "[classic]") {
  std::mt19937_64 rng(7);
  detail::AddressFitIndex tree;
  std::map<Addr, std::pair<uint64_t, uint32_t>> model;  // addr -> (size, node)
  std::vector<uint32_t> free_nodes;
  uint32_t next_node = 0;
  size_t most = 0;
  // Grows to thousands of blocks (leaves split), then drains (leaves merge and empty).
  for (int step = 0; step < 24000; ++step) {
    const bool grow = step < 12000;
    if (model.empty() || (grow && rng() % 3 != 0)) {
      Addr addr = rng() % (1ull << 40);
      if (model.count(addr)) continue;
      uint64_t size = 1 + rng() % 100000;
      uint32_t node = free_nodes.empty() ? next_node++ : free_nodes.back();
      if (!free_nodes.empty()) free_nodes.pop_back();
      tree.insert(node, addr, size);
      model[addr] = {size, node};
    } else if (rng() % (grow ? 2 : 4) != 0) {
      auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
      tree.erase(it->second.second);
      free_nodes.push_back(it->second.second);
      model.erase(it);
    } else {
      // A split remainder or a merged block: a new node (or the same) at an address that
      // keeps its place (below the next key), with a new size.
      auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
      auto next = std::next(it);
      Addr limit = next == model.end() ? it->first + 1000 : next->first;
      Addr addr = it->first + rng() % (limit - it->first);
      uint64_t size = 1 + rng() % 100000;
      uint32_t old_node = it->second.second;
      uint32_t node = old_node;
      if (rng() % 2) {
        node = free_nodes.empty() ? next_node++ : free_nodes.back();
        if (!free_nodes.empty()) free_nodes.pop_back();
        free_nodes.push_back(old_node);
      }
      tree.replace(old_node, node, addr, size);
      model.erase(it);
      model[addr] = {size, node};
    }
    REQUIRE(tree.size() == model.size());
    most = std::max(most, model.size());
    uint64_t want = 1 + rng() % 100000;
    Addr from = rng() % 2 ? 0 : rng() % (1ull << 40);
    uint32_t expected = kNoNode;
    for (auto it = model.lower_bound(from); it != model.end(); ++it)
      if (it->second.first >= want) {
        expected = it->second.second;
        break;
      }
    REQUIRE(tree.first_fit(want, from) == expected);
    auto lb = model.lower_bound(from);
    REQUIRE(tree.lower_bound(from) == (lb == model.end() ? kNoNode : lb->second.second));
  }
  CHECK(most > 4000);
  CHECK(model.size() < 10);
}

}  // namespace fraglab
