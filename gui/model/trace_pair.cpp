#include "gui/model/trace_pair.h"

#include <algorithm>
#include <cmath>

namespace fraglab::gui {

namespace {

constexpr size_t kSamples = 4096;

// The index of the lowest value in [begin, end).
uint64_t lowest(const std::vector<uint32_t>& v, uint64_t begin, uint64_t end) {
  end = std::min<uint64_t>(end, v.size());
  uint64_t best = begin;
  for (uint64_t i = begin; i < end; ++i)
    if (v[i] < v[best]) best = i;
  return best;
}

}  // namespace

std::vector<uint32_t> live_kib(const Trace& trace) {
  std::vector<uint32_t> out(trace.events.size());
  std::vector<uint64_t> size_of_id;
  uint64_t live = 0;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.kind == EventKind::Alloc) {
      if (e.id >= size_of_id.size()) size_of_id.resize(e.id + 1u, 0);
      size_of_id[e.id] = e.size;
      live += e.size;
    } else if (e.kind == EventKind::Free && e.id < size_of_id.size()) {
      live -= std::min(live, size_of_id[e.id]);
      size_of_id[e.id] = 0;
    }
    out[i] = ByteSeries::to_kib(live);
  }
  return out;
}

std::vector<uint64_t> detect_steps(const std::vector<uint32_t>& live) {
  uint64_t n = live.size();
  if (n < 64) return {0};
  // Resample to at most kSamples points (the mean of each bucket), then autocorrelate.
  size_t m = static_cast<size_t>(std::min<uint64_t>(n, kSamples));
  std::vector<double> x(m, 0.0);
  for (size_t j = 0; j < m; ++j) {
    uint64_t b = n * j / m, e = std::max(b + 1, n * (j + 1) / m);
    double sum = 0;
    for (uint64_t i = b; i < e; ++i) sum += live[i];
    x[j] = sum / static_cast<double>(e - b);
  }
  double mean = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(m);
  double var = 0;
  for (double& v : x) {
    v -= mean;
    var += v * v;
  }
  if (var <= 0) return {0};
  std::vector<double> r(m / 2 + 1, 0.0);
  for (size_t p = 2; p <= m / 2; ++p) {
    double sum = 0;
    for (size_t j = 0; j + p < m; ++j) sum += x[j] * x[j + p];
    r[p] = sum / var * static_cast<double>(m) / static_cast<double>(m - p);
  }
  // The period: the first local maximum of the autocorrelation close to the highest one (a
  // multiple of the period correlates as well as the period itself).
  double best = 0;
  for (size_t p = 3; p + 1 < r.size(); ++p)
    if (r[p] >= r[p - 1] && r[p] >= r[p + 1]) best = std::max(best, r[p]);
  if (best < 0.3) return {0};
  size_t period = 0;
  for (size_t p = 3; p + 1 < r.size() && period == 0; ++p)
    if (r[p] >= r[p - 1] && r[p] >= r[p + 1] && r[p] >= 0.85 * best) period = p;
  if (period == 0) return {0};
  auto events_per_step =
      static_cast<uint64_t>(static_cast<double>(period) * static_cast<double>(n) / static_cast<double>(m));
  if (events_per_step < 2) return {0};
  // Boundaries at the lowest live bytes, one a period.
  std::vector<uint64_t> steps{0};
  uint64_t at = lowest(live, 0, events_per_step);
  if (at > 0) steps.push_back(at);
  while (at + events_per_step / 2 < n) {
    uint64_t next = lowest(live, at + events_per_step / 2, at + events_per_step * 3 / 2);
    if (next <= at) break;
    if (next + events_per_step / 4 >= n) break;  // the tail: no full step after it
    steps.push_back(next);
    at = next;
  }
  return steps;
}

uint64_t Alignment::to_b(uint64_t e) const {
  uint64_t na = a->events(), nb = b->events();
  if (nb == 0) return 0;
  switch (how) {
    case Align::Events:
      return std::min(
          nb - 1, static_cast<uint64_t>(static_cast<double>(e) / std::max<double>(1, na) * static_cast<double>(nb)));
    case Align::Time: {
      int64_t t = a->time_at(e) - a->time_at(0);
      return std::min(nb - 1, b->index_at_time(b->time_at(0) + t));
    }
    case Align::Step: {
      const auto& sa = *steps_a;
      const auto& sb = *steps_b;
      auto it = std::upper_bound(sa.begin(), sa.end(), e);
      size_t k = static_cast<size_t>(it - sa.begin()) - 1;
      uint64_t a0 = sa[k], a1 = k + 1 < sa.size() ? sa[k + 1] : na;
      if (k >= sb.size()) return nb - 1;
      uint64_t b0 = sb[k], b1 = k + 1 < sb.size() ? sb[k + 1] : nb;
      double f = a1 > a0 ? static_cast<double>(e - a0) / static_cast<double>(a1 - a0) : 0.0;
      return std::min(nb - 1, b0 + static_cast<uint64_t>(f * static_cast<double>(b1 - b0)));
    }
  }
  return 0;
}

TracePairRun::TracePairRun(std::shared_ptr<const TraceInfo> a, std::shared_ptr<const TraceInfo> b, std::string policy,
                           std::function<void()> notify)
    : a_(std::move(a)), b_(std::move(b)), notify_(std::move(notify)) {
  worker_ = std::jthread([this, policy](std::stop_token stop) { work(stop, policy); });
}

TracePairRun::~TracePairRun() { worker_.request_stop(); }

std::shared_ptr<const TracePairRun::Result> TracePairRun::result() const {
  std::lock_guard lock(mutex_);
  return result_;
}

std::string TracePairRun::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

bool TracePairRun::settled() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void TracePairRun::publish(std::shared_ptr<const Result> r) {
  {
    std::lock_guard lock(mutex_);
    result_ = std::move(r);
  }
  if (notify_) notify_();
}

void TracePairRun::work(std::stop_token stop, std::string policy) {
  auto steps = std::make_shared<Result>();
  steps->steps_a = detect_steps(live_kib(a_->trace));
  steps->steps_b = detect_steps(live_kib(b_->trace));
  publish(steps);
  if (stop.stop_requested()) return;
  try {
    DiffOptions o;
    o.policy = policy;
    auto full = std::make_shared<Result>(*steps);
    full->diff = std::make_shared<TraceDiff>(diff_traces(a_->trace, a_->path, b_->trace, b_->path, o));
    if (stop.stop_requested()) return;
    publish(full);
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    error_ = e.what();
  }
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  if (notify_) notify_();
}

}  // namespace fraglab::gui
