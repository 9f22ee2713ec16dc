#include "report/tune.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <tuple>

#include "allocators/policy_options.h"
#include "allocators/pytorch/config.h"
#include "allocators/registry.h"
#include "import/trace_import.h"
#include "report/parallel_for.h"
#include "sim/capacity.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

namespace fraglab {

std::vector<TuneDimension> pytorch_search_space(bool with_capacity) {
  // Values PyTorch accepts (c10/cuda/CUDAAllocatorConfig.cpp): max_split_size_mb above the
  // 20 MiB large-buffer size; divisions powers of two; the list form maps size intervals
  // to divisions (the example of PyTorch's documentation). Unset first: the default.
  std::vector<TuneDimension> space{
      {"expandable_segments", {"", "True"}},
      {"max_split_size_mb", {"", "32", "64", "128", "256", "512", "1024"}},
      {"roundup_power2_divisions", {"", "1", "2", "4", "8", "16", "[256:1,512:2,1024:4,>:8]"}},
  };
  if (with_capacity) space.push_back({"garbage_collection_threshold", {"", "0.5", "0.6", "0.7", "0.8", "0.9"}});
  return space;
}

size_t TuneCandidate::keys_set() const { return conf.empty() ? 0 : PolicyOptions::parse(conf).values().size(); }

bool TuneReport::fits() const {
  const TuneCandidate& b = best();
  return !b.fails() && (!capacity || b.peak_reserved <= *capacity);
}

std::string policy_string(const std::string& policy, const std::string& conf) {
  return conf.empty() ? policy : policy + ":" + conf;
}

namespace {

using Choice = std::vector<size_t>;  // a value index per dimension

auto score(const TuneCandidate& c) {
  return std::tuple(c.recorded_ooms_failed(), c.ooms > 0, c.peak_reserved, c.device_calls, c.keys_set(), c.conf);
}

class Search {
 public:
  Search(const Trace& trace, const TuneOptions& o, const std::vector<TuneDimension>& space, unsigned threads)
      : trace_(trace), o_(o), space_(space), threads_(threads) {}

  std::string conf_of(const Choice& c) const {
    std::string conf;
    for (size_t d = 0; d < space_.size(); ++d)
      if (!space_[d].values[c[d]].empty())
        conf += (conf.empty() ? "" : ",") + space_[d].key + ":" + space_[d].values[c[d]];
    return conf;
  }

  // Replays every setting not yet tried, in parallel.
  void evaluate(const std::vector<std::string>& confs, const std::string& stage) {
    std::vector<std::string> todo;
    for (const auto& c : confs)
      if (!tried_.count(c) && std::find(todo.begin(), todo.end(), c) == todo.end()) todo.push_back(c);
    std::vector<TuneCandidate> out(todo.size());
    parallel_for(todo.size(), threads_, [&](size_t i) {
      try {
        out[i] = replay(todo[i], stage);
      } catch (const PolicyConfigError&) {
        throw;
      } catch (const std::exception& e) {  // a policy's internal error: say which setting
        throw std::runtime_error("replaying " + policy_string(o_.policy, todo[i]) + ": " + e.what());
      }
    });
    for (auto& c : out) tried_.emplace(c.conf, std::move(c));
  }

  const TuneCandidate& at(const std::string& conf) const { return tried_.at(conf); }
  const TuneCandidate& at(const Choice& c) const { return tried_.at(conf_of(c)); }
  bool better(const Choice& a, const Choice& b) const { return score(at(a)) < score(at(b)); }

  std::vector<TuneCandidate> ranking() const {
    std::vector<TuneCandidate> all;
    for (const auto& [conf, c] : tried_) all.push_back(c);
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return score(a) < score(b); });
    return all;
  }

 private:
  TuneCandidate replay(const std::string& conf, const std::string& stage) const {
    ReplayOptions options;
    options.on_oom = OnOom::Skip;
    SimDeviceConfig config;
    config.capacity = o_.capacity;
    PolicySpec spec = PolicySpec::parse(policy_string(o_.policy, conf));
    MemorySource source(trace_);
    ReplayResult r = replay_simulated(source, spec, config, options, &trace_.events);
    TuneCandidate c;
    c.conf = conf;
    c.stage = stage;
    c.peak_reserved = r.reserved.bytes;
    c.peak_allocated = r.allocated.bytes;
    c.device_calls = r.calls.total();
    c.ooms = static_cast<uint64_t>(
        std::count_if(r.ooms.begin(), r.ooms.end(), [](const OomRecord& o) { return !o.recorded; }));
    c.recorded_ooms = r.recorded_ooms.size();
    c.recorded_ooms_served = r.recorded_ooms_served();
    c.seconds = r.seconds;
    return c;
  }

  const Trace& trace_;
  const TuneOptions& o_;
  const std::vector<TuneDimension>& space_;
  unsigned threads_;
  std::map<std::string, TuneCandidate> tried_;
};

// The recorded setting in the search's canonical key order when the space holds it
// (so it is not replayed twice), else as recorded.
std::string canonical_conf(const std::string& recorded, const std::vector<TuneDimension>& space, const Search& s) {
  if (recorded.empty()) return recorded;
  PolicyOptions parsed;
  try {
    parsed = PolicyOptions::parse(recorded);
  } catch (const PolicyConfigError&) {
    return recorded;
  }
  Choice c(space.size(), 0);
  size_t matched = 0;
  for (size_t d = 0; d < space.size(); ++d) {
    if (!parsed.has(space[d].key)) continue;
    auto& values = space[d].values;
    auto it = std::find(values.begin(), values.end(), parsed.get_string(space[d].key, ""));
    if (it == values.end()) return recorded;
    c[d] = static_cast<size_t>(it - values.begin());
    ++matched;
  }
  return matched == parsed.values().size() ? s.conf_of(c) : recorded;
}

// Stage 2's lists: each knob's values by their sweep result, one per distinct outcome.
std::vector<std::vector<size_t>> promising_values(const Search& s, const std::vector<TuneDimension>& space,
                                                  size_t keep) {
  std::vector<std::vector<size_t>> kept(space.size());
  for (size_t d = 0; d < space.size(); ++d) {
    std::vector<size_t> order(space[d].values.size());
    for (size_t v = 0; v < order.size(); ++v) order[v] = v;
    auto alone = [&](size_t v) {
      Choice c(space.size(), 0);
      c[d] = v;
      return &s.at(c);
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score(*alone(a)) < score(*alone(b)); });
    std::vector<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>> outcomes;
    for (size_t v : order) {
      auto outcome =
          std::tuple(alone(v)->peak_reserved, alone(v)->device_calls, alone(v)->ooms, alone(v)->recorded_ooms_failed());
      if (std::find(outcomes.begin(), outcomes.end(), outcome) != outcomes.end()) continue;
      outcomes.push_back(outcome);
      kept[d].push_back(v);
      if (kept[d].size() == keep) break;
    }
  }
  return kept;
}

std::vector<Choice> product(const std::vector<std::vector<size_t>>& lists) {
  std::vector<Choice> out{{}};
  for (const auto& list : lists) {
    std::vector<Choice> next;
    for (const auto& prefix : out)
      for (size_t v : list) {
        next.push_back(prefix);
        next.back().push_back(v);
      }
    out = std::move(next);
  }
  return out;
}

}  // namespace

// The largest excess of live requested bytes (the failed request included) over the capacity at a
// recorded OOM (what no setting can serve), and where there is none the least room they leave.
std::pair<uint64_t, uint64_t> oom_live_fit(const Trace& trace, uint64_t capacity) {
  std::vector<uint64_t> size_of;
  uint64_t live = 0, excess = 0, room = UINT64_MAX;
  for (const Event& e : trace.events) {
    if (e.kind == EventKind::Alloc) {
      if (e.id >= size_of.size()) size_of.resize(e.id + 1u);
      size_of[e.id] = e.size;
      live += e.size;
    } else if (e.kind == EventKind::Free && e.id < size_of.size()) {
      live -= std::min(live, size_of[e.id]);
    } else if (e.kind == EventKind::Oom) {
      if (live + e.size > capacity)
        excess = std::max(excess, live + e.size - capacity);
      else
        room = std::min(room, capacity - live - e.size);
    }
  }
  return {excess, excess || room == UINT64_MAX ? 0 : room};
}

TuneReport tune(const std::string& trace_path, const TuneOptions& o, int trace_device) {
  if (!find_policy(o.policy))
    throw PolicyConfigError("unknown policy '" + o.policy + "' (fraglab policies lists them)");
  return tune(load_trace(trace_path, {trace_device}), trace_path, o);
}

TuneReport tune(Trace trace, const std::string& trace_path, const TuneOptions& options) {
  TuneReport report;
  report.trace = trace_path;
  report.policy = options.policy;
  const PolicyInfo* info = find_policy(options.policy);
  if (!info) throw PolicyConfigError("unknown policy '" + options.policy + "' (fraglab policies lists them)");
  TuneOptions o = options;
  o.capacity = capacity_for(trace, o.capacity, &report.capacity_note);
  report.capacity = o.capacity;
  MemorySource stats_source(trace);
  TraceStats stats = compute_stats(stats_source);
  report.events = stats.events;
  report.live_bytes_bound = stats.peak_live_requested;
  report.recorded_peak_reserved = stats.recorded_peak_reserved;
  if (auto recorded = detail::recorded_conf(trace.meta.allocator_settings)) report.recorded_conf = *recorded.text;
  report.recorded_conf_inferred = trace.meta.settings_inferred;
  // Every candidate is a complete setting: nothing inherited from the recording.
  trace.meta.allocator_settings.clear();

  const std::vector<TuneDimension> space = o.space.empty() ? pytorch_search_space(o.capacity.has_value()) : o.space;
  for (const auto& d : space) {
    PolicyOptions keys;
    keys.set(d.key, "");
    keys.check_known(o.policy, info->options);
    if (d.values.empty()) throw PolicyConfigError("search dimension " + d.key + " has no values");
  }
  report.search_space_size = 1;
  for (const auto& d : space) report.search_space_size *= d.values.size();
  report.threads = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  Search s(trace, o, space, report.threads);
  auto start = std::chrono::steady_clock::now();

  // 1. Sweep.
  std::string recorded_conf = canonical_conf(report.recorded_conf, space, s);
  s.evaluate({recorded_conf}, "recorded");
  std::vector<std::string> given;
  for (const auto& conf : o.also) given.push_back(canonical_conf(conf, space, s));
  s.evaluate(given, "given");
  std::vector<std::string> sweep;
  for (size_t d = 0; d < space.size(); ++d)
    for (size_t v = 0; v < space[d].values.size(); ++v) {
      Choice c(space.size(), 0);
      c[d] = v;
      sweep.push_back(s.conf_of(c));
    }
  s.evaluate(sweep, "sweep");

  // 2. Combine the promising values.
  std::vector<Choice> combos = product(promising_values(s, space, o.keep_per_dimension));
  std::vector<std::string> confs;
  for (const auto& c : combos) confs.push_back(s.conf_of(c));
  s.evaluate(confs, "combine");

  // 3. Refine by steepest descent over single changes, from the best setting of the space so far.
  Choice current(space.size(), 0);
  for (const auto& c : combos)
    if (s.better(c, current)) current = c;
  for (size_t d = 0; d < space.size(); ++d)
    for (size_t v = 0; v < space[d].values.size(); ++v) {
      Choice c(space.size(), 0);
      c[d] = v;
      if (s.better(c, current)) current = c;
    }
  for (int pass = 0; pass < 8; ++pass) {
    std::vector<Choice> neighbours;
    for (size_t d = 0; d < space.size(); ++d)
      for (size_t v = 0; v < space[d].values.size(); ++v)
        if (v != current[d]) {
          neighbours.push_back(current);
          neighbours.back()[d] = v;
        }
    std::vector<std::string> confs;
    for (const auto& n : neighbours) confs.push_back(s.conf_of(n));
    s.evaluate(confs, "refine");
    Choice best = current;
    for (const auto& n : neighbours)
      if (s.better(n, best)) best = n;
    if (best == current) break;
    current = best;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.recorded = s.at(recorded_conf);
  report.ranking = s.ranking();
  if (report.capacity && report.best().recorded_ooms_failed())
    std::tie(report.oom_live_excess, report.oom_live_room) = oom_live_fit(trace, *report.capacity);
  return report;
}

}  // namespace fraglab
