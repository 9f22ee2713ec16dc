// OrderedKeys (allocators/detail/ordered_keys.h) against std::set: the PyTorch model's
// decisions depend on visiting free blocks in exactly std::set's order.
#include <catch2/catch.hpp>

#include <iterator>
#include <random>
#include <set>
#include <vector>

#include "allocators/detail/ordered_keys.h"

namespace {

struct Key {
  uint64_t hi;
  uint64_t lo;
  bool operator<(const Key& o) const { return hi != o.hi ? hi < o.hi : lo < o.lo; }
  bool operator==(const Key& o) const { return hi == o.hi && lo == o.lo; }
};
using Keys = fraglab::detail::OrderedKeys<Key>;

// Values spread over the linear bins, the logarithmic ones and the top of the 48-bit range,
// with many equal values (equal sizes tie-break on lo).
Key random_key(std::mt19937_64& rng) {
  static const uint64_t kValues[] = {0,
                                     512,
                                     1024,
                                     16383,
                                     16384,
                                     1 << 20,
                                     (1 << 20) + 512,
                                     2u << 20,
                                     20u << 20,
                                     (1ull << 47) + 12345,
                                     (1ull << 48) - 1};
  uint64_t group = rng() % 3;
  uint64_t value = rng() % 2 ? kValues[rng() % std::size(kValues)] : (rng() % (1ull << (rng() % 48 + 1)));
  return Key{group << 48 | value, rng() % 64};
}

void require_same(const Keys& keys, const std::set<Key>& model) {
  REQUIRE(keys.size() == model.size());
  std::vector<Key> forward(keys.begin(), keys.end());
  REQUIRE(forward == std::vector<Key>(model.begin(), model.end()));
  if (model.empty()) return;
  std::vector<Key> backward;
  auto it = keys.end();
  do {
    --it;
    backward.push_back(*it);
  } while (!(it == keys.begin()));
  REQUIRE(backward == std::vector<Key>(model.rbegin(), model.rend()));
}

}  // namespace

TEST_CASE("OrderedKeys keeps std::set's order through inserts, erases and replaces", "[pytorch][ordered_keys]") {
  std::mt19937_64 rng(7);
  Keys keys;
  std::set<Key> model;
  for (int step = 0; step < 20000; ++step) {
    const Key k = random_key(rng);
    auto lb = keys.lower_bound(k);
    auto mlb = model.lower_bound(k);
    REQUIRE((lb == keys.end()) == (mlb == model.end()));
    if (mlb != model.end()) REQUIRE(*lb == *mlb);
    switch (rng() % 4) {
      case 0:
      case 1:
        REQUIRE(keys.insert(k) == model.insert(k).second);
        break;
      case 2:
        REQUIRE(keys.erase(k) == model.erase(k));
        break;
      default:  // replace the lower bound's key by k (a split or merge), or erase it
        if (mlb == model.end() || model.count(k)) break;
        model.erase(mlb);
        model.insert(k);
        keys.replace(lb, k);
    }
    if (step % 997 == 0) require_same(keys, model);
  }
  require_same(keys, model);
  // Every key erased through iterators found by lower_bound.
  while (!model.empty()) {
    Key k = *std::next(model.begin(), static_cast<long>(rng() % model.size()));
    keys.erase(keys.lower_bound(k));
    model.erase(k);
  }
  require_same(keys, model);
  REQUIRE(keys.begin() == keys.end());
}
