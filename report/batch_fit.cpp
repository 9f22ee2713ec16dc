#include "report/batch_fit.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "allocators/pytorch/config.h"
#include "report/alloc_groups.h"
#include "report/parallel_for.h"
#include "report/tune.h"
#include "sim/replay_simulated.h"
#include "traces/alloc_site.h"
#include "traces/trace_stats.h"
#include "traces/units.h"

namespace fraglab {

std::pair<std::string, uint64_t> parse_probe_arg(const std::string& text) {
  size_t at = text.rfind('@');
  if (at == std::string::npos || at == 0 || at + 1 == text.size())
    throw std::invalid_argument("probe '" + text + "' has no batch: write PATH@BATCH (e.g. run_bs4.pickle.gz@4)");
  std::string digits = text.substr(at + 1);
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos || std::stoull(digits) == 0)
    throw std::invalid_argument("probe '" + text + "': the batch '" + digits +
                                "' is not a positive integer below 10^9");
  return {text.substr(0, at), std::stoull(digits)};
}

const char* size_law_name(SizeLaw law) {
  static const char* const names[] = {"constant", "linear", "quadratic", "irregular", "unmatched"};
  return names[static_cast<int>(law)];
}

namespace {

bool is_structural(EventKind k) {
  return k == EventKind::Alloc || k == EventKind::Free || k == EventKind::FreeRequested || k == EventKind::EmptyCache ||
         k == EventKind::PoolRelease;
}

// A probe's history as the alignment reads it: its allocations in order, and a token per structural
// event (an allocation's stream and pool; a free's allocation by ordinal).
struct Skeleton {
  std::vector<uint64_t> alloc_events;  // event index of each allocation
  std::vector<uint64_t> sizes;
  std::vector<uint64_t> stack_keys;  // a hash of each allocation's frames (0: none recorded)
  std::vector<std::tuple<EventKind, StreamIndex, PoolIndex, uint64_t>> tokens;
  bool has_stacks = false;
};

uint64_t frames_hash(const std::vector<StackFrame>& frames) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  for (const auto& f : frames) {
    mix(f.filename);
    mix(f.name);
    mix(std::to_string(f.line));
  }
  return frames.empty() ? 0 : (h | 1);
}

Skeleton skeleton_of(const Trace& t) {
  Skeleton s;
  std::vector<uint64_t> stack_hash(t.meta.stacks.size());
  for (size_t k = 0; k < t.meta.stacks.size(); ++k) stack_hash[k] = frames_hash(t.meta.stacks[k]);
  std::vector<uint64_t> ordinal_of_id;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (!is_structural(e.kind)) continue;
    uint64_t arg = 0;
    if (e.kind == EventKind::Alloc) {
      if (e.id >= ordinal_of_id.size()) ordinal_of_id.resize(e.id + 1, UINT64_MAX);
      ordinal_of_id[e.id] = s.alloc_events.size();
      arg = s.alloc_events.size();
      s.alloc_events.push_back(i);
      s.sizes.push_back(e.size);
      uint64_t key = e.stack < stack_hash.size() ? stack_hash[e.stack] : 0;
      s.has_stacks = s.has_stacks || key != 0;
      s.stack_keys.push_back(key);
    } else if (e.kind == EventKind::Free || e.kind == EventKind::FreeRequested) {
      arg = e.id < ordinal_of_id.size() ? ordinal_of_id[e.id] : UINT64_MAX;
    }
    s.tokens.emplace_back(e.kind, e.stream, e.pool, arg);
  }
  return s;
}

// Could `small` (at batch bs) and `large` (at the larger batch bl) be one tensor's sizes? Equal, or
// grown by no more than the batch ratio squared (sequence length enters attention squared).
bool sizes_compatible(uint64_t large, uint64_t bl, uint64_t small, uint64_t bs) {
  if (large == small) return true;
  if (large < small) return false;
  long double ratio = static_cast<long double>(bl) / static_cast<long double>(bs);
  return static_cast<long double>(large) <= static_cast<long double>(small) * ratio * ratio * 1.02L + 4096.0L;
}

// Lagrange's polynomial through the points, evaluated at x, rounded to the nearest integer: exact rational
// arithmetic in 128 bits, each step checked; where a step would overflow (batches and sizes far past any
// GPU's), the same sum in long double. Saturated to the int64 range.
int64_t lagrange(const uint64_t* xs, const uint64_t* ys, size_t n, uint64_t x) {
  __extension__ typedef __int128 i128;
  auto exact = [&](i128& out) {
    i128 num = 0, den = 1;
    for (size_t i = 0; i < n; ++i) {
      i128 a = static_cast<i128>(ys[i]), b = 1;
      for (size_t j = 0; j < n; ++j) {
        if (j == i) continue;
        if (__builtin_mul_overflow(a, static_cast<i128>(x) - static_cast<i128>(xs[j]), &a) ||
            __builtin_mul_overflow(b, static_cast<i128>(xs[i]) - static_cast<i128>(xs[j]), &b))
          return false;
      }
      if (b < 0) a = -a, b = -b;
      i128 nb, ad;  // num/den + a/b
      if (__builtin_mul_overflow(num, b, &nb) || __builtin_mul_overflow(a, den, &ad) ||
          __builtin_add_overflow(nb, ad, &num) || __builtin_mul_overflow(den, b, &den))
        return false;
    }
    i128 q = num / den, r = num % den;
    if (r < 0) r = -r;
    if (2 * r >= den) q += num < 0 ? -1 : 1;
    out = q;
    return true;
  };
  long double v;
  if (i128 q; exact(q)) {
    v = static_cast<long double>(q);
  } else {
    v = 0;
    for (size_t i = 0; i < n; ++i) {
      long double term = static_cast<long double>(ys[i]);
      for (size_t j = 0; j < n; ++j)
        if (j != i)
          term *= (static_cast<long double>(x) - static_cast<long double>(xs[j])) /
                  (static_cast<long double>(xs[i]) - static_cast<long double>(xs[j]));
      v += term;
    }
    v = std::round(v);
  }
  constexpr long double kMax = static_cast<long double>(INT64_MAX) / 2;
  return static_cast<int64_t>(std::clamp(v, -kMax, kMax));
}

}  // namespace

BatchModel::BatchModel(std::vector<BatchProbe> probes) : probes_(std::move(probes)) {
  if (probes_.size() < 2)
    throw std::invalid_argument("fit needs probe snapshots at two or more batch sizes (PATH@BATCH ...)");
  if (probes_.size() > kMaxProbes)
    throw std::invalid_argument(fmt::format("fit takes at most {} probes ({} given)", kMaxProbes, probes_.size()));
  std::sort(probes_.begin(), probes_.end(), [](const auto& a, const auto& b) { return a.batch < b.batch; });
  for (size_t k = 1; k < probes_.size(); ++k)
    if (probes_[k].batch == probes_[k - 1].batch)
      throw std::invalid_argument(fmt::format("probes {} and {} are both at batch {}: each probe needs its own batch",
                                              probes_[k - 1].name, probes_[k].name, probes_[k].batch));
  ref_ = probes_.size() - 1;
  if (auto conf = detail::recorded_conf(reference().trace.meta.allocator_settings)) recorded_conf_ = *conf.text;
  for (const auto& p : probes_) {
    std::string conf;
    if (auto c = detail::recorded_conf(p.trace.meta.allocator_settings)) conf = *c.text;
    if (conf != recorded_conf_)
      alignment_.notes.push_back(
          fmt::format("{} ran under \"{}\", the reference under \"{}\": sizes are compared "
                      "as they were requested, the settings of the reference are replayed",
                      p.name, conf, recorded_conf_));
  }
  align();
  fit_laws();
  find_optional();
}

void BatchModel::find_optional() {
  const Trace& ref = reference().trace;
  auto conv = [](const std::vector<StackFrame>& frames) {
    return std::any_of(frames.begin(), frames.end(), [](const StackFrame& f) {
      return f.filename.find("torch/nn/modules/conv.py") != std::string::npos ||
             (f.filename.find("torch/nn/functional.py") != std::string::npos && f.name.rfind("conv", 0) == 0);
    });
  };
  std::vector<bool> conv_stack(ref.meta.stacks.size());
  bool convolves = false;
  for (size_t k = 0; k < ref.meta.stacks.size(); ++k)
    convolves = convolves || (conv_stack[k] = conv(ref.meta.stacks[k]));
  std::vector<const Event*> kept;
  kept_.clear();
  for (uint64_t i = 0; i < ref.events.size(); ++i)
    if (is_structural(ref.events[i].kind)) kept.push_back(&ref.events[i]), kept_.push_back(i);
  optional_events_.assign(kept.size(), false);
  if (!convolves) return;
  for (size_t i = 0; i + 1 < kept.size(); ++i) {
    const Event& e = *kept[i];
    // Freed straight after its kernel: the next event frees it (free_requested, then free_completed).
    size_t n = i + 1;
    if (kept[n]->kind == EventKind::FreeRequested && kept[n]->id == e.id && n + 1 < kept.size()) ++n;
    bool scratch = e.kind == EventKind::Alloc && kept[n]->kind == EventKind::Free && kept[n]->id == e.id;
    bool conv_context = e.stack < conv_stack.size() && (conv_stack[e.stack] || ref.meta.stacks[e.stack].empty());
    optional_events_[i] = scratch && conv_context;
  }
}

void BatchModel::align() {
  Skeleton ref = skeleton_of(reference().trace);
  alloc_events_ = ref.alloc_events;
  alignment_.reference_allocs = ref.alloc_events.size();
  sizes_.assign(probes_.size(), std::vector<uint64_t>(ref.alloc_events.size(), UINT64_MAX));
  sizes_[ref_] = ref.sizes;
  std::vector<bool> unmatched(ref.alloc_events.size(), false);
  for (size_t p = 0; p < probes_.size(); ++p) {
    if (p == ref_) continue;
    Skeleton s = skeleton_of(probes_[p].trace);
    if (s.tokens == ref.tokens) {  // the same program, event for event
      sizes_[p] = s.sizes;
      continue;
    }
    alignment_.exact = false;
    // Resynchronising walk over the allocations: match while they agree (stream, pool, stack where both
    // recorded them, a size one tensor could have at both batches); at a disagreement, the nearest pair of
    // positions from which four allocations agree again.
    const bool stacks = ref.has_stacks && s.has_stacks;
    const uint64_t br = reference().batch, bp = probes_[p].batch;
    auto same_kind = [&](size_t i, size_t j) {
      auto& a = ref.tokens;  // tokens are not per allocation; compare the allocation's own fields
      (void)a;
      const Event& x = reference().trace.events[ref.alloc_events[i]];
      const Event& y = probes_[p].trace.events[s.alloc_events[j]];
      return x.stream == y.stream && x.pool == y.pool && (!stacks || ref.stack_keys[i] == s.stack_keys[j]);
    };
    auto agree = [&](size_t i, size_t j) {
      return i < ref.sizes.size() && j < s.sizes.size() && same_kind(i, j) &&
             sizes_compatible(ref.sizes[i], br, s.sizes[j], bp);
    };
    auto agree_run = [&](size_t i, size_t j) {
      for (size_t k = 0; k < 4; ++k)
        if (i + k < ref.sizes.size() && j + k < s.sizes.size() && !agree(i + k, j + k)) return false;
      return true;
    };
    constexpr size_t kWindow = 256;
    size_t i = 0, j = 0, left_out = 0;
    while (i < ref.sizes.size() && j < s.sizes.size()) {
      if (agree(i, j)) {
        sizes_[p][i++] = s.sizes[j++];
        continue;
      }
      size_t best_di = 1, best_dj = 1;
      bool found = false;
      for (size_t d = 1; d <= 2 * kWindow && !found; ++d)
        for (size_t di = 0; di <= d && !found; ++di) {
          size_t dj = d - di;
          if (di > kWindow || dj > kWindow) continue;
          if (agree_run(i + di, j + dj) && agree(i + di, j + dj)) {
            best_di = di;
            best_dj = dj;
            found = true;
          }
        }
      // The same number skipped on both sides at the same place is one allocation per side whose size
      // changed otherwise (a workspace): paired, the law says how it scales.
      size_t paired = std::min(best_di, best_dj);
      for (size_t k = 0; k < paired; ++k)
        if (same_kind(i + k, j + k)) sizes_[p][i + k] = s.sizes[j + k];
      for (size_t k = 0; k < best_di; ++k)
        if (sizes_[p][i + k] == UINT64_MAX) unmatched[i + k] = true;
      left_out += best_dj - std::min(best_dj, paired);
      i += best_di;
      j += best_dj;
    }
    for (; i < ref.sizes.size(); ++i) unmatched[i] = true;
    left_out += s.sizes.size() - std::min(s.sizes.size(), j);
    alignment_.others_unmatched_allocs += left_out;
    alignment_.notes.push_back(
        fmt::format("{} (batch {}) made {} allocations against the reference's {} in another order or number: matched "
                    "allocation by allocation{}",
                    probes_[p].name, bp, s.sizes.size(), ref.sizes.size(),
                    stacks ? " by call stack, stream and size" : " by stream and size (no stacks to match by)"));
  }
  for (size_t i = 0; i < unmatched.size(); ++i)
    if (unmatched[i]) {
      ++alignment_.unmatched_allocs;
      alignment_.unmatched_bytes += ref.sizes[i];
    }
  if (alignment_.unmatched_allocs)
    alignment_.notes.push_back(
        fmt::format("{} allocations of the reference ({}) have no counterpart in some probe: taken as constant",
                    alignment_.unmatched_allocs, format_size(alignment_.unmatched_bytes)));
}

// The probes' sizes of one allocation, by batch, those matched only.
size_t BatchModel::points_for(size_t alloc, uint64_t* batches, uint64_t* sizes) const {
  size_t n = 0;
  for (size_t p = 0; p < probes_.size(); ++p)
    if (sizes_[p][alloc] != UINT64_MAX) {
      batches[n] = probes_[p].batch;
      sizes[n++] = sizes_[p][alloc];
    }
  return n;
}

void BatchModel::fit_laws() {
  laws_.assign(alloc_events_.size(), SizeLaw::Constant);
  std::vector<uint64_t> xs(probes_.size()), ys(probes_.size());
  for (size_t a = 0; a < laws_.size(); ++a) {
    size_t n = points_for(a, xs.data(), ys.data());
    if (n < 2) {
      laws_[a] = SizeLaw::Unmatched;
      continue;
    }
    if (std::all_of(ys.begin(), ys.begin() + n, [&](uint64_t y) { return y == ys[0]; })) continue;
    auto passes = [&](size_t degree) {  // through the degree+1 largest batches, and through every other
      const uint64_t* px = xs.data() + (n - degree - 1);
      const uint64_t* py = ys.data() + (n - degree - 1);
      for (size_t k = 0; k < n; ++k)
        if (lagrange(px, py, degree + 1, xs[k]) != static_cast<int64_t>(ys[k])) return false;
      return true;
    };
    if (passes(1))
      laws_[a] = SizeLaw::Linear;
    else if (n >= 4 && passes(2))
      laws_[a] = SizeLaw::Quadratic;
    else
      laws_[a] = SizeLaw::Irregular;
  }
  // A tensor does not get smaller as the batch grows: many that do mean a batch given wrong (PATH@BATCH).
  for (size_t a = 0; a < laws_.size(); ++a) {
    size_t n = points_for(a, xs.data(), ys.data());
    if (n >= 2 && ys[n - 1] < ys[0]) ++alignment_.shrinking_allocs;
  }
  if (alignment_.shrinking_allocs)
    alignment_.notes.push_back(fmt::format(
        "{} allocations are smaller at a larger batch: check the batches given (PATH@BATCH), or the probes are of "
        "different programs",
        alignment_.shrinking_allocs));
}

uint64_t BatchModel::size_at(size_t alloc, uint64_t batch) const {
  uint64_t xs[kMaxProbes], ys[kMaxProbes];  // the constructor refuses more probes
  size_t n = points_for(alloc, xs, ys);
  switch (laws_[alloc]) {
    case SizeLaw::Constant:
    case SizeLaw::Unmatched:
      return sizes_[ref_][alloc];
    case SizeLaw::Quadratic: {
      int64_t v = lagrange(xs + n - 3, ys + n - 3, 3, batch);
      return v < 1 ? 1 : static_cast<uint64_t>(v);
    }
    default: {
      int64_t v = lagrange(xs + n - 2, ys + n - 2, 2, batch);
      return v < 1 ? 1 : static_cast<uint64_t>(v);
    }
  }
}

Trace BatchModel::at(uint64_t batch) const {
  const Trace& ref = reference().trace;
  Trace t;
  t.meta = ref.meta;
  t.meta.source = fmt::format("{} at batch {} (fraglab fit)", reference().name, batch);
  t.meta.segments.clear();
  t.meta.initial = {};
  t.meta.gpu_limit = false;
  t.meta.expandable_flipped.clear();
  t.meta.allocator_settings.clear();
  t.meta.settings_inferred = false;
  t.events.reserve(ref.events.size());
  size_t a = 0;
  for (const Event& e : ref.events) {
    if (!is_structural(e.kind)) continue;
    Event out = e;
    if (e.kind == EventKind::Alloc) out.size = size_at(a++, batch);
    out.addr = 0;
    t.events.push_back(out);
  }
  return t;
}

uint64_t BatchModel::live_peak_at(uint64_t batch) const {
  const Trace& ref = reference().trace;
  std::vector<uint64_t> live_size;
  uint64_t live = 0, peak = 0;
  size_t a = 0;
  for (const Event& e : ref.events) {
    if (e.kind == EventKind::Alloc) {
      if (e.id >= live_size.size()) live_size.resize(e.id + 1, 0);
      live_size[e.id] = size_at(a++, batch);
      live += live_size[e.id];
      peak = std::max(peak, live);
    } else if (e.kind == EventKind::Free && e.id < live_size.size()) {
      live -= live_size[e.id];
      live_size[e.id] = 0;
    }
  }
  return peak;
}

std::vector<uint64_t> BatchModel::law_counts() const {
  std::vector<uint64_t> n(5, 0);
  for (SizeLaw l : laws_) ++n[static_cast<size_t>(l)];
  return n;
}

namespace {

// Replays of synthesized traces, each (setting, batch) once, on worker threads.
class FitSearch {
 public:
  FitSearch(const BatchModel& model, const FitOptions& o) : model_(model), o_(o) {
    threads_ = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  }

  BatchPoint point(const std::string& conf, uint64_t batch) {
    evaluate(conf, {batch});
    std::lock_guard lock(mutex_);
    return done_.at({conf, batch});
  }

  // Evaluates every batch not tried yet under `conf`, in parallel.
  void evaluate(const std::string& conf, std::vector<uint64_t> batches) {
    {
      std::lock_guard lock(mutex_);
      std::erase_if(batches, [&](uint64_t b) { return done_.count({conf, b}) > 0; });
    }
    std::sort(batches.begin(), batches.end());
    batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
    parallel_for(batches.size(), threads_, [&](size_t i) {
      BatchPoint p = replay(conf, batches[i]);
      std::lock_guard lock(mutex_);
      done_[{conf, batches[i]}] = p;
    });
  }

  // The largest batch in [1, limit] whose replay fits under `conf` (0: none), searching by halving between
  // the largest known to fit and the smallest known to fail, then looking a few batches past it (the
  // allocator's caching makes fitting not quite monotone in the batch).
  SettingAnswer answer(const std::string& conf, const std::string& label, uint64_t limit) {
    SettingAnswer s;
    s.conf = conf;
    s.label = label;
    uint64_t lo = 0, hi = limit + 1;
    while (hi - lo > 1) {
      // Several points per round, one per thread: the interval shrinks by threads + 1.
      std::vector<uint64_t> mids;
      for (unsigned k = 1; k <= threads_; ++k) {
        uint64_t m = lo + (hi - lo) * k / (threads_ + 1);
        if (m > lo && m < hi) mids.push_back(m);
      }
      if (mids.empty()) mids.push_back(lo + (hi - lo) / 2);
      evaluate(conf, mids);
      for (uint64_t m : mids) {
        if (fits(conf, m))
          lo = std::max(lo, m);
        else
          hi = std::min(hi, m);
      }
      if (lo >= hi) hi = lo + 1;  // a fit above a failure: the halving goes on from the fit
    }
    for (;;) {  // a few batches past the first failure, in case one of them fits again
      std::vector<uint64_t> above;
      for (uint64_t b = lo + 2; b <= std::min(limit, lo + 9); ++b) above.push_back(b);
      evaluate(conf, above);
      uint64_t higher = 0;
      for (uint64_t b : above)
        if (fits(conf, b)) higher = b;
      if (!higher) break;
      lo = higher;
    }
    s.largest_batch = lo;
    if (lo + 1 <= limit)
      s.first_failing = lo + 1;
    else
      s.first_failing = limit + 1;  // by the live bytes alone
    return s;
  }

  bool fits(const std::string& conf, uint64_t batch) {
    std::lock_guard lock(mutex_);
    return done_.at({conf, batch}).fits;
  }

  void fill_points(SettingAnswer& s, const std::vector<uint64_t>& batches) {
    evaluate(s.conf, batches);
    std::lock_guard lock(mutex_);
    for (uint64_t b : batches) s.points.push_back(done_.at({s.conf, b}));
    std::sort(s.points.begin(), s.points.end(), [](const auto& a, const auto& b) { return a.batch < b.batch; });
    s.points.erase(
        std::unique(s.points.begin(), s.points.end(), [](const auto& a, const auto& b) { return a.batch == b.batch; }),
        s.points.end());
  }

 private:
  BatchPoint replay(const std::string& conf, uint64_t batch) const {
    Trace trace = model_.at(batch);
    ReplayOptions options;
    options.on_oom = OnOom::Skip;  // a failed workspace is survived; any other failure ends the run (below)
    options.oracle_bound = false;
    options.recorded_ooms = false;
    SimDeviceConfig config;
    config.capacity = o_.capacity;
    config.addresses = AddressModel::Cuda;
    MemorySource source(trace);
    ReplayResult r =
        replay_simulated(source, PolicySpec::parse(policy_string("pytorch", conf)), config, options, &trace.events);
    BatchPoint p;
    p.batch = batch;
    const std::vector<bool>& optional = model_.optional_events();
    auto fatal = std::find_if(r.ooms.begin(), r.ooms.end(), [&](const OomRecord& o) {
      return o.event_index >= optional.size() || !optional[o.event_index];
    });
    p.fits = fatal == r.ooms.end();
    p.skipped_workspaces =
        static_cast<uint64_t>(std::count_if(r.ooms.begin(), fatal, [](const OomRecord&) { return true; }));
    p.peak_reserved = r.reserved.bytes;
    p.peak_allocated = r.allocated.bytes;
    p.live_peak = r.live_bytes_bound;
    if (!p.fits) {
      p.fail_event = fatal->event_index;
      p.fail_request = fatal->size;
      if (fatal->event_index < optional.size()) {
        const Event& e = model_.reference_event(fatal->event_index);
        const auto& stacks = model_.reference().trace.meta.stacks;
        p.fail_site = e.stack && e.stack < stacks.size()
                          ? user_site_label(stacks[e.stack]) + " (via " + site_label(stacks[e.stack]) + ")"
                          : size_class_label(e.size);
      }
      // What the program would have reserved up to its death (a replay that goes on past it counts more).
    }
    return p;
  }

  const BatchModel& model_;
  const FitOptions& o_;
  unsigned threads_ = 1;
  std::mutex mutex_;
  std::map<std::pair<std::string, uint64_t>, BatchPoint> done_;
};

// The largest batch whose live bytes fit the capacity (0: none), by doubling then halving.
uint64_t live_limit(const BatchModel& model, uint64_t capacity, uint64_t max_batch) {
  if (model.live_peak_at(1) > capacity) return 0;
  uint64_t lo = 1, hi = 2;
  while (hi <= max_batch && model.live_peak_at(hi) <= capacity) {
    lo = hi;
    hi *= 2;
  }
  if (hi > max_batch) {
    if (model.live_peak_at(max_batch) <= capacity) return max_batch;
    hi = max_batch;
  }
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    (model.live_peak_at(mid) <= capacity ? lo : hi) = mid;
  }
  return lo;
}

uint64_t recorded_peak(const Trace& t) {
  MemorySource source(t);
  return compute_stats(source).recorded_peak_reserved;
}

// The peak reserved bytes of `model` at `batch` on an unlimited device under `conf`.
uint64_t predicted_peak(const BatchModel& model, uint64_t batch, const std::string& conf) {
  Trace trace = model.at(batch);
  ReplayOptions options;
  options.oracle_bound = false;
  options.recorded_ooms = false;
  SimDeviceConfig config;
  config.addresses = AddressModel::Cuda;
  MemorySource source(trace);
  return replay_simulated(source, PolicySpec::parse(policy_string("pytorch", conf)), config, options, &trace.events)
      .reserved.bytes;
}

std::vector<ModelCheck> model_checks(const BatchModel& model) {
  std::vector<ModelCheck> checks;
  for (const auto& p : model.probes()) {
    uint64_t rec = recorded_peak(p.trace);
    if (!rec || !p.trace.meta.initial.empty()) continue;  // no recorded peak to compare (or a history begun late)
    checks.push_back({fmt::format("probe at batch {} replayed from the model", p.batch), p.batch, rec,
                      predicted_peak(model, p.batch, model.recorded_conf())});
  }
  // Out of sample: the model without the largest probe predicts it.
  if (model.probes().size() >= 3) {
    std::vector<BatchProbe> rest(model.probes().begin(), model.probes().end() - 1);
    const BatchProbe& held = model.probes().back();
    uint64_t rec = recorded_peak(held.trace);
    if (rec && held.trace.meta.initial.empty()) {
      BatchModel without(std::move(rest));
      checks.push_back({fmt::format("batch {} predicted from the smaller probes alone", held.batch), held.batch, rec,
                        predicted_peak(without, held.batch, without.recorded_conf())});
    }
  }
  return checks;
}

std::vector<GrowthGroup> growth_at(const BatchModel& model, uint64_t batch, bool& by_site) {
  const Trace& ref = model.reference().trace;
  by_site = false;
  for (const auto& s : ref.meta.stacks) by_site = by_site || !s.empty();
  // The live set at the live peak of the trace at `batch`.
  std::vector<uint64_t> live_size, live_alloc;
  std::vector<bool> is_live;
  uint64_t live = 0, peak = 0, peak_index = 0;
  size_t a = 0;
  for (size_t i = 0; i < ref.events.size(); ++i) {
    const Event& e = ref.events[i];
    if (e.kind == EventKind::Alloc) {
      if (e.id >= live_size.size()) live_size.resize(e.id + 1, 0);
      live_size[e.id] = model.size_at(a++, batch);
      live += live_size[e.id];
      if (live > peak) peak = live, peak_index = i + 1;
    } else if (e.kind == EventKind::Free && e.id < live_size.size()) {
      live -= live_size[e.id];
      live_size[e.id] = 0;
    }
  }
  std::vector<uint64_t> site_of(ref.events.size() ? 0 : 0);
  std::map<std::string, GrowthGroup> groups;
  std::vector<std::string> site_of_stack;
  for (const auto& s : ref.meta.stacks) site_of_stack.push_back(user_site_label(s));
  // Replay the liveness again up to the peak, keyed by allocation ordinal.
  std::vector<size_t> ordinal_of_id;
  std::vector<bool> alive(model.allocs(), false);
  a = 0;
  for (size_t i = 0; i < peak_index; ++i) {
    const Event& e = ref.events[i];
    if (e.kind == EventKind::Alloc) {
      if (e.id >= ordinal_of_id.size()) ordinal_of_id.resize(e.id + 1, SIZE_MAX);
      ordinal_of_id[e.id] = a;
      alive[a++] = true;
    } else if (e.kind == EventKind::Free && e.id < ordinal_of_id.size() && ordinal_of_id[e.id] != SIZE_MAX) {
      alive[ordinal_of_id[e.id]] = false;
    }
  }
  for (size_t k = 0; k < alive.size(); ++k) {
    if (!alive[k]) continue;
    const Event& e = ref.events[model.alloc_event(k)];
    uint64_t now = model.size_at(k, batch), next = model.size_at(k, batch + 1);
    std::string key = model.law(k) == SizeLaw::Constant || model.law(k) == SizeLaw::Unmatched
                          ? std::string("(constant in the batch: parameters, optimizer state, workspaces)")
                          : (by_site && e.stack < site_of_stack.size() && e.stack != 0 ? site_of_stack[e.stack]
                                                                                       : size_class_label(now));
    GrowthGroup& g = groups[key];
    g.key = key;
    g.bytes += now;
    g.per_batch_item += static_cast<int64_t>(next) - static_cast<int64_t>(now);
    ++g.allocs;
  }
  std::vector<GrowthGroup> out;
  for (auto& [k, g] : groups) out.push_back(g);
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) {
    return std::tie(y.per_batch_item, y.bytes) < std::tie(x.per_batch_item, x.bytes);
  });
  return out;
}

}  // namespace

FitReport fit_batch(const BatchModel& model, const FitOptions& o) {
  if (!o.capacity) throw std::invalid_argument("fit needs the device's capacity (--capacity, or --oom SNAPSHOT)");
  auto start = std::chrono::steady_clock::now();
  FitReport r;
  r.capacity = o.capacity;
  r.live_limit_batch = live_limit(model, o.capacity, o.max_batch);
  FitSearch search(model, o);

  // The settings answered for: the recorded one, the defaults, expandable segments, those given.
  std::vector<std::pair<std::string, std::string>> settings{{model.recorded_conf(), "recorded"}};
  auto add = [&settings](const std::string& conf, const std::string& label) {
    for (const auto& [c, l] : settings)
      if (c == conf) return;
    settings.emplace_back(conf, label);
  };
  add("", "default");
  add("expandable_segments:True", "expandable segments");
  for (const auto& c : o.settings) add(c, "given");

  std::vector<uint64_t> probe_batches;
  for (const auto& p : model.probes()) probe_batches.push_back(p.batch);
  auto finish = [&](SettingAnswer s) {
    std::vector<uint64_t> show = probe_batches;
    for (uint64_t b : o.batches) show.push_back(b);
    for (int64_t d = -1; d <= 1; ++d) {
      int64_t b = static_cast<int64_t>(s.largest_batch) + d;
      if (b >= 1 && static_cast<uint64_t>(b) <= std::max<uint64_t>(r.live_limit_batch + 1, 1)) show.push_back(b);
    }
    search.fill_points(s, show);
    r.answers.push_back(std::move(s));
  };
  for (const auto& [conf, label] : settings) finish(search.answer(conf, label, r.live_limit_batch));

  // tune's best where the recorded setting first fails: the cheapest setting that fits that batch, then its own
  // largest batch.
  // Copied, not referenced: finish() below appends to r.answers and may move its elements.
  const std::optional<uint64_t> recorded_first_failing = r.answers.front().first_failing;
  if (o.search_best && recorded_first_failing && *recorded_first_failing <= r.live_limit_batch) {
    TuneOptions t;
    t.capacity = o.capacity;
    t.jobs = o.jobs;
    TuneReport tr = tune(model.at(*recorded_first_failing), model.reference().name, t);
    const TuneCandidate& best = tr.best();
    bool known = false;
    for (const auto& a : r.answers) known = known || a.conf == best.conf;
    if (!best.fails() && !known) finish(search.answer(best.conf, "tune's best", r.live_limit_batch));
  }

  const SettingAnswer& recorded = r.answers.front();
  r.growth_batch = recorded.largest_batch ? recorded.largest_batch : model.reference().batch;
  r.growth = growth_at(model, r.growth_batch, r.growth_by_site);
  r.checks = model_checks(model);

  const auto& al = model.alignment();
  double worst = 0;
  for (const auto& c : r.checks) worst = std::max(worst, std::abs(c.error()));
  std::vector<uint64_t> laws = model.law_counts();
  uint64_t odd = laws[static_cast<size_t>(SizeLaw::Irregular)] + laws[static_cast<size_t>(SizeLaw::Unmatched)];
  uint64_t growing = laws[static_cast<size_t>(SizeLaw::Linear)] + laws[static_cast<size_t>(SizeLaw::Quadratic)] +
                     laws[static_cast<size_t>(SizeLaw::Irregular)];
  if (al.shrinking_allocs * 10 > growing && al.shrinking_allocs)
    r.confidence = fmt::format(
        "low: {} of {} allocations that change with the batch are smaller at a larger one: "
        "the batches given (PATH@BATCH) look wrong, or the probes are of different programs",
        al.shrinking_allocs, growing);
  else if (r.checks.empty())
    r.confidence = fmt::format("unchecked: the probes record no allocator calls to check the model against ({})",
                               al.exact ? "they align exactly" : "they align allocation by allocation");
  else if (al.exact && odd == 0 && worst == 0)
    r.confidence =
        "high: every probe made the same allocations in the same order, every size follows a polynomial "
        "in the batch exactly, and the model replays each probe's recorded peak to the byte";
  else if (al.unmatched_bytes * 20 > recorded_peak(model.reference().trace) && al.unmatched_allocs)
    r.confidence = fmt::format(
        "low: the probes do not align ({} allocations, {} of the reference unmatched): the program's allocations "
        "depend on more than the batch, or its kernels change path between the probes' batches (probes at "
        "batches {}, {} and {} would show whether the reference's path holds above it)",
        al.unmatched_allocs, format_size(al.unmatched_bytes), model.reference().batch, model.reference().batch + 2,
        model.reference().batch + 4);
  else
    r.confidence = fmt::format(
        "{}: {} of {} allocations irregular or unmatched (extrapolated or kept), the worst "
        "check {:.2f}% off its recorded peak",
        worst <= 0.01 ? "medium" : "low", odd, model.allocs(), 100.0 * worst);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace fraglab
