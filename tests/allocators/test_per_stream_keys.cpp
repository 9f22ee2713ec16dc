// PerStreamKeys: the per-stream free lists of cupy and the RMM pools (OrderedKeys per stream,
// handed back when empty and reused by the next stream that needs one).
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "allocators/detail/per_stream_keys.h"

namespace fraglab {
namespace {

struct Key {
  uint64_t hi;
  uint64_t lo;
  uint32_t node;
};

}  // namespace

TEST_CASE("PerStreamKeys keeps each stream's keys in (hi, lo) order and reuses emptied indexes", "[classic]") {
  std::mt19937_64 rng(11);
  detail::PerStreamKeys<Key> lists;
  std::map<StreamIndex, std::set<std::pair<uint64_t, uint64_t>>> model;
  for (int step = 0; step < 20000; ++step) {
    auto stream = static_cast<StreamIndex>(rng() % 6);
    auto& want = model[stream];
    if (want.empty() || rng() % 2) {
      uint64_t size = 512 * (1 + rng() % 64), addr = rng() % (1ull << 36);
      if (want.emplace(size, addr).second) lists.get(stream).insert(Key{size, addr, 0});
    } else {
      auto it = std::next(want.begin(), static_cast<long>(rng() % want.size()));
      lists.find(stream)->erase(Key{it->first, it->second, 0});
      want.erase(it);
      lists.release_if_empty(stream);
    }
    for (auto& [s, keys] : model) {
      auto* got = lists.find(s);
      if (keys.empty()) {
        REQUIRE(got == nullptr);  // handed back
        continue;
      }
      REQUIRE(got != nullptr);
      REQUIRE(got->size() == keys.size());
      // The best fit for a size: the first key at or after (size, 0), as std::set finds it.
      uint64_t size = 512 * (1 + rng() % 64);
      auto expected = keys.lower_bound({size, 0});
      auto found = got->lower_bound(Key{size, 0, 0});
      REQUIRE((found == got->end()) == (expected == keys.end()));
      if (expected != keys.end()) REQUIRE(std::make_pair(found->hi, found->lo) == *expected);
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> order;
  for (auto& [s, keys] : model) {
    if (keys.empty()) continue;
    order.clear();
    for (const Key& k : *lists.find(s)) order.emplace_back(k.hi, k.lo);
    REQUIRE(order == std::vector<std::pair<uint64_t, uint64_t>>(keys.begin(), keys.end()));
  }
  CHECK(lists.stream_bound() == 6);
}

}  // namespace fraglab
