// The statistics' distributions (summarize): their percentiles, minimum, maximum and buckets against a sort of
// the same values, on columns shaped as real ones are (many equal sizes, a long tail, hostile times).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "traces/trace_stats.h"

using namespace fraglab;

namespace {

double at_percentile(std::vector<double> sorted, double p) {
  std::sort(sorted.begin(), sorted.end());
  const auto i = std::min(static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5), sorted.size() - 1);
  return sorted[i];
}

void check_against_sort(const std::vector<double>& values) {
  const Distribution d = summarize(values);
  REQUIRE(d.count == values.size());
  CHECK(d.p50 == at_percentile(values, 0.50));
  CHECK(d.p90 == at_percentile(values, 0.90));
  CHECK(d.p99 == at_percentile(values, 0.99));
  CHECK(d.min == *std::min_element(values.begin(), values.end()));
  CHECK(d.max == *std::max_element(values.begin(), values.end()));
  uint64_t bucketed = 0;
  for (uint64_t b : d.log2_buckets) bucketed += b;
  CHECK(bucketed == values.size());
  double sum = 0;
  for (double v : values) sum += v;
  CHECK(d.mean == sum / static_cast<double>(values.size()));
}

}  // namespace

TEST_CASE("statistics: percentiles equal a sort's on columns of every shape", "[stats]") {
  std::mt19937_64 rng(7);
  SECTION("sizes: a few sizes repeated, a long tail") {
    std::vector<double> v;
    const double common[] = {512, 1024, 2097152, 20971520};
    for (int i = 0; i < 200000; ++i)
      v.push_back(rng() % 10 < 8 ? common[rng() % 4] : static_cast<double>((rng() % (uint64_t{1} << 34)) + 1));
    check_against_sort(v);
  }
  SECTION("one value only, and two") {
    check_against_sort(std::vector<double>(1000, 4096.0));
    check_against_sort({7.0});
    check_against_sort({3.0, 1.0});
  }
  SECTION("percentiles in one bin of the first pass, and in neighbouring ones") {
    std::vector<double> v;
    for (int i = 0; i < 50000; ++i) v.push_back(1e6 + static_cast<double>(rng() % 1000));  // one bin
    check_against_sort(v);
    for (int i = 0; i < 5000; ++i) v.push_back(static_cast<double>(rng() % 100));
    check_against_sort(v);
  }
  SECTION("lifetimes from hostile times: negative, zero, past 2^64") {
    std::vector<double> v;
    for (int i = 0; i < 30000; ++i) {
      const double a = static_cast<double>(static_cast<int64_t>(rng()));
      const double b = static_cast<double>(static_cast<int64_t>(rng()));
      v.push_back(b - a);
    }
    v.push_back(0.0);
    v.push_back(std::ldexp(1.0, 70));
    v.push_back(-std::ldexp(1.0, 70));
    check_against_sort(v);
  }
  SECTION("an empty column") {
    const Distribution d = summarize({});
    CHECK(d.count == 0);
    CHECK(d.p50 == 0);
  }
}
