#include "report/ranks.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include "report/tune.h"
#include "sim/capacity.h"
#include "sim/fidelity.h"
#include "traces/trace_io.h"
#include "traces/units.h"

namespace fraglab {

namespace {
// "rank3", "rank_3", "rank-3" in a file name, as frameworks name their per-rank dumps.
const std::regex& rank_pattern() {
  static const std::regex pattern("_?rank[_-]?([0-9]{1,6})", std::regex::icase);
  return pattern;
}
}  // namespace

std::vector<std::pair<std::string, std::vector<std::string>>> rank_jobs(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  for (const auto& a : args) {
    std::error_code ec;
    if (std::filesystem::is_directory(a, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : std::filesystem::directory_iterator(a, ec))
        if (entry.is_regular_file(ec) && looks_like_trace_file(entry.path().string()))
          found.push_back(entry.path().string());
      if (ec) throw std::invalid_argument(a + ": cannot list the directory: " + ec.message());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(a);
    }
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> jobs;
  for (const auto& f : files) {
    std::string name = strip_trace_extension(std::filesystem::path(f).filename().string());
    std::string job = std::regex_replace(name, rank_pattern(), "");
    auto it = std::find_if(jobs.begin(), jobs.end(), [&](const auto& j) { return j.first == job; });
    if (it == jobs.end())
      jobs.push_back({job, {f}});
    else
      it->second.push_back(f);
  }
  if (jobs.empty()) throw std::invalid_argument("ranks needs two or more snapshots (files, or a directory of them)");
  for (const auto& [job, list] : jobs)
    if (list.size() < 2)
      throw std::invalid_argument("job " + job + " has one snapshot (" + list.front() +
                                  "): ranks needs every rank's, named rankN (e.g. " + job + "_rank0.pickle.gz)");
  return jobs;
}

namespace {

// The rank a file is: "rank3" (or "rank_3", "rank-3") in its name, as frameworks name their dumps; else the
// device its history is of.
int rank_of(const std::string& path, int device) {
  std::smatch m;
  std::string name = std::filesystem::path(path).filename().string();
  if (std::regex_search(name, m, rank_pattern())) return std::stoi(m[1].str());
  return device;
}

std::vector<const Event*> allocs_of(const Trace& t) {
  std::vector<const Event*> out;
  for (const Event& e : t.events)
    if (e.kind == EventKind::Alloc) out.push_back(&e);
  return out;
}

RankDivergence diverge(int rank, const Trace& t, const Trace& ref) {
  RankDivergence d;
  d.rank = rank;
  auto a = allocs_of(t), r = allocs_of(ref);
  d.allocs = a.size();
  d.reference_allocs = r.size();
  size_t n = std::min(a.size(), r.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i]->size != r[i]->size) {
      d.same = false;
      d.alloc_ordinal = i;
      d.event_index = static_cast<uint64_t>(a[i] - t.events.data());
      d.size = a[i]->size;
      d.reference_size = r[i]->size;
      return d;
    }
  if (a.size() != r.size()) {
    d.same = false;
    d.alloc_ordinal = n;
    d.event_index = n < a.size() ? static_cast<uint64_t>(a[n] - t.events.data()) : t.events.size();
    d.size = n < a.size() ? a[n]->size : 0;
    d.reference_size = n < r.size() ? r[n]->size : 0;
  }
  return d;
}

// One setting for every rank: each rank's own search, then every rank's best few tried on all.
void setting_for_all(RanksReport& rep, const std::vector<Trace>& traces, const RanksOptions& o) {
  std::vector<std::optional<uint64_t>> caps;
  rep.capacities_known = true;
  for (const auto& r : rep.ranks) rep.capacities_known = rep.capacities_known && (o.capacity || r.run.capacity);
  std::vector<std::string> candidates;
  for (size_t k = 0; k < traces.size(); ++k) {
    caps.push_back(o.capacity ? o.capacity : rep.ranks[k].run.capacity);
    TuneOptions t;
    t.capacity = caps.back();
    t.jobs = o.jobs;
    TuneReport r = tune(traces[k], rep.ranks[k].path, t);
    if (r.oom_live_excess) rep.beyond_any_setting.emplace_back(rep.ranks[k].rank, r.oom_live_excess);
    for (size_t i = 0; i < r.ranking.size() && i < 6; ++i)
      if (std::find(candidates.begin(), candidates.end(), r.ranking[i].conf) == candidates.end())
        candidates.push_back(r.ranking[i].conf);
  }
  // Every candidate on every rank (tune replays the ones it is given besides its own search: `also`).
  std::map<std::string, std::pair<bool, uint64_t>> score;  // conf -> (fits every rank, worst peak)
  for (const auto& c : candidates) score[c] = {true, 0};
  std::set<std::string> tried;
  for (size_t k = 0; k < traces.size(); ++k) {
    TuneOptions t;
    t.capacity = caps[k];
    t.jobs = o.jobs;
    t.also = candidates;
    TuneReport r = tune(traces[k], rep.ranks[k].path, t);
    for (const auto& c : r.ranking) tried.insert(c.conf);
    for (auto& [conf, s] : score) {
      const std::string& name = conf;  // a structured binding: clang 14 cannot capture one in a lambda
      auto it =
          std::find_if(r.ranking.begin(), r.ranking.end(), [&](const TuneCandidate& c) { return c.conf == name; });
      if (it == r.ranking.end()) {
        s.first = false;
        continue;
      }
      s.first = s.first && !it->fails() && (!caps[k] || it->peak_reserved <= *caps[k]);
      s.second = std::max(s.second, it->peak_reserved);
    }
  }
  rep.settings_tried = tried.size();
  const std::pair<const std::string, std::pair<bool, uint64_t>>* best = nullptr;
  for (const auto& entry : score) {
    auto key = [](const auto& e) { return std::make_tuple(!e.second.first, e.second.second, e.first.size()); };
    if (!best || key(entry) < key(*best)) best = &entry;
  }
  if (best) {
    rep.fits_all_conf = best->first;
    rep.fits_all = best->second.first;
    rep.fits_all_worst_peak = best->second.second;
  }
}

}  // namespace

RanksReport read_ranks(const std::vector<std::string>& files, const RanksOptions& o) {
  RanksReport rep;
  std::vector<Trace> traces;
  DiffOptions d;
  d.capacity = o.capacity;
  for (const auto& path : files) {
    Trace t = load_trace(path, {kAnyDevice});
    RankRun r;
    r.path = path;
    r.device = t.meta.device;
    r.rank = rank_of(path, t.meta.device);
    r.run = summarize_run(t, path, d);
    FidelityOptions f;
    f.capacity = capacity_for(t, o.capacity);
    FidelityResult fr = check_fidelity(t, f);
    r.fidelity_exact = fr.exact;
    if (!fr.exact) r.fidelity_note = fmt::format("diverges at event {}: {}", fr.event_index, fr.what);
    for (uint64_t i = 0; i < t.events.size(); ++i)
      if (t.events[i].kind == EventKind::Oom) {
        r.first_oom_time_us = t.events[i].time_us;
        r.first_oom_event = i;
        break;
      }
    rep.ranks.push_back(std::move(r));
    traces.push_back(std::move(t));
  }
  // By rank (files in any order); two files of one rank are two runs, kept apart by path.
  std::vector<size_t> order(rep.ranks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rep.ranks[a].rank < rep.ranks[b].rank; });
  {
    std::vector<RankRun> ranks;
    std::vector<Trace> sorted;
    for (size_t i : order) ranks.push_back(std::move(rep.ranks[i])), sorted.push_back(std::move(traces[i]));
    rep.ranks = std::move(ranks);
    traces = std::move(sorted);
  }
  for (size_t k = 1; k < traces.size(); ++k) rep.divergence.push_back(diverge(rep.ranks[k].rank, traces[k], traces[0]));

  // The rank that reaches the limit first: the first OOM on the clock; without one, the highest peak against
  // its capacity (or the highest peak).
  size_t limit = 0;
  bool any_oom = false;
  for (size_t k = 0; k < rep.ranks.size(); ++k)
    if (rep.ranks[k].first_oom_time_us != INT64_MAX &&
        (!any_oom || rep.ranks[k].first_oom_time_us < rep.ranks[limit].first_oom_time_us)) {
      limit = k;
      any_oom = true;
    }
  auto load = [&](size_t k) {
    const RunSummary& r = rep.ranks[k].run;
    uint64_t peak = std::max(r.recorded_peak_reserved, r.peak_reserved);
    return r.capacity && *r.capacity ? static_cast<double>(peak) / static_cast<double>(*r.capacity)
                                     : static_cast<double>(peak);
  };
  if (!any_oom)
    for (size_t k = 1; k < rep.ranks.size(); ++k)
      if (load(k) > load(limit)) limit = k;
  rep.limit_rank = rep.ranks[limit].rank;
  const RunSummary& lr = rep.ranks[limit].run;
  if (any_oom)
    rep.limit_reason = fmt::format("rank {} ran out of memory first (event {}, {} recorded OOMs)", rep.limit_rank,
                                   rep.ranks[limit].first_oom_event, lr.recorded_ooms);
  else
    rep.limit_reason = fmt::format("no rank ran out of memory; rank {} reserves the most ({}{})", rep.limit_rank,
                                   format_size(std::max(lr.recorded_peak_reserved, lr.peak_reserved)),
                                   lr.capacity ? " of " + format_size(*lr.capacity) : std::string());
  // What it holds beyond the lightest rank, by call site and category.
  size_t lightest = 0;
  for (size_t k = 1; k < rep.ranks.size(); ++k)
    if (rep.ranks[k].run.live_bytes_bound < rep.ranks[lightest].run.live_bytes_bound) lightest = k;
  if (lightest != limit) {
    rep.extra_by_site = match_groups(rep.ranks[lightest].run.groups.by_site, lr.groups.by_site);
    rep.extra_by_category = match_groups(rep.ranks[lightest].run.groups.by_category, lr.groups.by_category);
  }
  if (o.search) setting_for_all(rep, traces, o);
  return rep;
}

}  // namespace fraglab
