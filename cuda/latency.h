// Host-side latency of allocator calls: every operation's nanoseconds, summarized as
// mean, median, 99th percentile and maximum (what allocator benchmarks report: RMM's
// replay benchmark, PyTorch's allocator microbenchmarks).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace fraglab::cuda {

struct LatencySummary {
  uint64_t count = 0;
  double mean_ns = 0, p50_ns = 0, p99_ns = 0, max_ns = 0;
};

class LatencyLog {
 public:
  void reserve(size_t n) { samples_.reserve(n); }
  void add(std::chrono::steady_clock::duration d) {
    samples_.push_back(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()));
  }
  LatencySummary summary() const;

 private:
  std::vector<uint64_t> samples_;
};

// Times one call: the clock is read right around it, nothing else.
template <typename Fn>
auto timed(LatencyLog& log, Fn&& fn) {
  auto start = std::chrono::steady_clock::now();
  auto result = fn();
  log.add(std::chrono::steady_clock::now() - start);
  return result;
}

}  // namespace fraglab::cuda
