#include "cuda/latency.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fraglab::cuda {

LatencySummary LatencyLog::summary() const {
  LatencySummary s;
  s.count = samples_.size();
  if (samples_.empty()) return s;
  std::vector<uint64_t> sorted = samples_;
  std::sort(sorted.begin(), sorted.end());
  // Nearest-rank percentiles: the smallest sample with at least p% of samples at or below it.
  auto rank = [&](double p) {
    size_t r = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
    return static_cast<double>(sorted[std::clamp<size_t>(r, 1, sorted.size()) - 1]);
  };
  long double sum = std::accumulate(sorted.begin(), sorted.end(), static_cast<long double>(0));
  s.mean_ns = static_cast<double>(sum / static_cast<long double>(sorted.size()));
  s.p50_ns = rank(0.50);
  s.p99_ns = rank(0.99);
  s.max_ns = static_cast<double>(sorted.back());
  return s;
}

}  // namespace fraglab::cuda
