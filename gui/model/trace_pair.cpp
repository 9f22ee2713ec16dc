#include "gui/model/trace_pair.h"

#include <algorithm>
#include <cmath>

#include "report/program_attribution.h"

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

namespace {

// Live requested bytes after each event.
std::vector<uint64_t> live_bytes(const Trace& trace) {
  std::vector<uint64_t> out(trace.events.size());
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
    out[i] = live;
  }
  return out;
}

// The loop's period (detect_steps) on the live bytes of allocations and frees alone, at event indices.
std::vector<uint64_t> period_steps(const Trace& trace, const std::vector<uint64_t>& live) {
  std::vector<uint64_t> at;
  std::vector<uint32_t> kib;
  for (uint64_t i = 0; i < trace.events.size(); ++i)
    if (trace.events[i].kind == EventKind::Alloc || trace.events[i].kind == EventKind::Free) {
      at.push_back(i);
      kib.push_back(ByteSeries::to_kib(live[i]));
    }
  std::vector<uint64_t> steps = detect_steps(kib);
  for (size_t k = 1; k < steps.size(); ++k) steps[k] = at[steps[k]];
  return steps;
}

uint64_t range_of(const std::vector<uint64_t>& v) {
  if (v.empty()) return 0;
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return *hi - *lo;
}

}  // namespace

std::vector<uint32_t> live_kib(const Trace& trace) {
  std::vector<uint64_t> live = live_bytes(trace);
  std::vector<uint32_t> out(live.size());
  for (size_t i = 0; i < live.size(); ++i) out[i] = ByteSeries::to_kib(live[i]);
  return out;
}

PairedSteps paired_steps(const TraceInfo& a, const TraceInfo& b) {
  PairedSteps out;
  if (a.steps.size() == b.steps.size() && a.steps.size() > 1) {
    out.a = a.steps, out.b = b.steps, out.how = "the program's steps";
    return out;
  }
  std::vector<uint64_t> la = live_bytes(a.trace), lb = live_bytes(b.trace);
  // One threshold for both: a quarter of the smaller range (runs of one program at two settings have one).
  uint64_t h = std::max<uint64_t>(std::min(range_of(la), range_of(lb)) / 4, 1);
  struct Candidate {
    std::vector<uint64_t> a, b;
    const char* how;
  };
  std::vector<Candidate> candidates;
  candidates.push_back({a.steps, b.steps, "the program's steps"});
  candidates.push_back({steps_from_live_bytes(la, h), steps_from_live_bytes(lb, h), "live-bytes hysteresis"});
  candidates.push_back({period_steps(a.trace, la), period_steps(b.trace, lb), "the loop's period"});
  for (Candidate& c : candidates)
    if (c.a.size() == c.b.size() && c.a.size() > 1) {
      out.a = std::move(c.a), out.b = std::move(c.b), out.how = c.how;
      return out;
    }
  // None agree: the closest in number (steps past the shorter list map to the other's end).
  auto mismatch = [](const Candidate& c) {
    double x = static_cast<double>(c.a.size()), y = static_cast<double>(c.b.size());
    return std::abs(x - y) / std::max(x, y);
  };
  auto best = std::min_element(candidates.begin(), candidates.end(),
                               [&](const Candidate& x, const Candidate& y) { return mismatch(x) < mismatch(y); });
  out.a = std::move(best->a), out.b = std::move(best->b);
  out.how = std::string(best->how) + " (the two traces' counts differ)";
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
  if (nb == 0 || na == 0) return 0;
  switch (how) {
    case Align::Events:
      return std::min(
          nb - 1, static_cast<uint64_t>(static_cast<double>(e) / std::max<double>(1, na) * static_cast<double>(nb)));
    case Align::Time: {
      // Anchors: matching step starts (or just each trace's first and last event), each trace's time
      // scaled between them, so a run that took longer, or paused, is stretched, not squeezed.
      std::vector<uint64_t> anchors_a{0}, anchors_b{0};
      if (steps_a && steps_b && steps_a->size() == steps_b->size()) anchors_a = *steps_a, anchors_b = *steps_b;
      anchors_a.push_back(na - 1), anchors_b.push_back(nb - 1);
      auto k = static_cast<size_t>(std::upper_bound(anchors_a.begin(), anchors_a.end() - 1, e) - anchors_a.begin());
      k = k == 0 ? 0 : k - 1;
      double ta0 = static_cast<double>(a->time_at(anchors_a[k])),
             ta1 = static_cast<double>(a->time_at(anchors_a[k + 1]));
      double tb0 = static_cast<double>(b->time_at(anchors_b[k])),
             tb1 = static_cast<double>(b->time_at(anchors_b[k + 1]));
      if (ta1 <= ta0 || tb1 < tb0) {  // no clock (or a stalled one) here: by event position within the anchors
        double f = anchors_a[k + 1] > anchors_a[k]
                       ? static_cast<double>(e - anchors_a[k]) / static_cast<double>(anchors_a[k + 1] - anchors_a[k])
                       : 0.0;
        return std::min(nb - 1,
                        anchors_b[k] + static_cast<uint64_t>(f * static_cast<double>(anchors_b[k + 1] - anchors_b[k])));
      }
      double f = std::clamp((static_cast<double>(a->time_at(e)) - ta0) / (ta1 - ta0), 0.0, 1.0);
      auto t = static_cast<int64_t>(std::llround(tb0 + f * (tb1 - tb0)));
      return std::clamp(b->index_at_time(t), anchors_b[k], nb - 1);
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
  PairedSteps paired = paired_steps(*a_, *b_);
  steps->steps_a = std::move(paired.a);
  steps->steps_b = std::move(paired.b);
  steps->steps_how = std::move(paired.how);
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
