#include "report/ranks.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "import/trace_import.h"
#include "report/program_attribution.h"
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

std::vector<std::pair<std::string, std::vector<std::string>>> group_by_job(const std::vector<std::string>& files) {
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
  return jobs;
}

int rank_in_name(const std::string& path) {
  std::smatch m;
  std::string name = std::filesystem::path(path).filename().string();
  if (std::regex_search(name, m, rank_pattern())) return std::stoi(m[1].str());
  return -1;
}

std::vector<std::pair<int, std::string>> rank_set(const std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::vector<std::string>>> jobs;
  std::error_code ec;
  std::filesystem::path one = args.size() == 1 ? std::filesystem::path(args.front()) : std::filesystem::path();
  if (args.size() == 1 && !std::filesystem::exists(one, ec) &&
      std::filesystem::is_directory(one.parent_path().empty() ? "." : one.parent_path(), ec)) {
    // DIR/JOB: the job of that name among the directory's snapshots ("ranks/ddp.default" for ddp.default_rankN).
    for (auto& j : rank_jobs({one.parent_path().empty() ? std::string(".") : one.parent_path().string()}))
      if (j.first == one.filename().string()) jobs.push_back(std::move(j));
    if (jobs.empty()) throw std::invalid_argument(args.front() + ": no such file, directory or job of rank snapshots");
  } else {
    jobs = rank_jobs(args);
  }
  std::string where;
  for (const auto& a : args) where += (where.empty() ? "" : " ") + a;
  if (jobs.size() != 1)
    throw std::invalid_argument(
        fmt::format("{}: {} jobs' snapshots; a rank set is one job's (name them, or one "
                    "directory a job)",
                    where, jobs.size()));
  std::vector<std::pair<int, std::string>> out;
  for (const auto& f : jobs.front().second) {
    int r = rank_in_name(f);
    if (r < 0) throw std::invalid_argument(f + ": no rankN in its name");
    for (const auto& [rank, other] : out)
      if (rank == r) throw std::invalid_argument(fmt::format("{} and {} are both rank {}", other, f, r));
    out.emplace_back(r, f);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string rank_sets_markdown(const CompareResults& results) {
  std::string out;
  auto cells = results.cell_table();
  for (const auto& [job, files] : group_by_job(results.traces)) {
    if (files.size() < 2 || rank_in_name(files.front()) < 0) continue;
    std::vector<std::pair<int, size_t>> ranks;  // rank, trace index
    for (const auto& f : files) ranks.emplace_back(rank_in_name(f), results.trace_index(f));
    std::sort(ranks.begin(), ranks.end());
    out += fmt::format("\n### Rank set {} ({} ranks)\n\n| policy |", job, ranks.size());
    for (const auto& rk : ranks) out += fmt::format(" rank {} |", rk.first);
    out += " job's worst |\n|---|";
    for (size_t i = 0; i <= ranks.size(); ++i) out += "---:|";
    out += "\n";
    for (size_t p = 0; p < results.policies.size(); ++p) {
      out += "| `" + results.policies[p] + "` |";
      uint64_t worst = 0, ooms = 0;
      int worst_rank = -1;
      for (const auto& [rank, t] : ranks) {
        const CompareRow* row = cells[t * results.policies.size() + p];
        if (!row) {
          out += " - |";
          continue;
        }
        out += " " + format_size(row->peak_reserved) + (row->ooms ? fmt::format(" ({} OOMs)", row->ooms) : "") + " |";
        ooms += row->ooms;
        if (worst_rank < 0 || row->peak_reserved > worst) worst = row->peak_reserved, worst_rank = rank;
      }
      out += worst_rank < 0 ? " - |\n"
                            : fmt::format(" {} (rank {}){} |\n", format_size(worst), worst_rank,
                                          ooms ? fmt::format(", {} OOMs", ooms) : std::string());
    }
  }
  return out;
}

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
  auto jobs = group_by_job(files);
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
  int r = rank_in_name(path);
  return r >= 0 ? r : device;
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

std::vector<RankPoint> rank_timeline(const Trace& t, size_t points) {
  std::vector<RankPoint> all;
  std::unordered_map<AllocId, uint64_t> live_size;
  uint64_t live = 0, reserved = 0;
  for (uint64_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (e.kind == EventKind::Alloc) {
      live += e.size;
      live_size[e.id] = e.size;
    } else if (e.kind == EventKind::Free) {
      if (auto it = live_size.find(e.id); it != live_size.end()) {
        live -= it->second;
        live_size.erase(it);
      }
    } else if (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap) {
      reserved += e.size;  // what the recording allocator took from the device
    } else if (e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentUnmap) {
      reserved -= std::min(reserved, e.size);
    } else {
      continue;
    }
    all.push_back({e.time_us, i, live, reserved});
  }
  if (points == 0 || all.size() <= points) return all;
  // Thinned: each bucket keeps its point of highest live bytes (a peak is never smoothed away).
  std::vector<RankPoint> out;
  size_t per = (all.size() + points - 1) / points;
  for (size_t b = 0; b < all.size(); b += per) {
    size_t best = b;
    for (size_t k = b; k < std::min(all.size(), b + per); ++k)
      if (all[k].live > all[best].live || (all[k].live == all[best].live && all[k].reserved > all[best].reserved))
        best = k;
    out.push_back(all[best]);
  }
  return out;
}

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
    // Fidelity under the recording's own limit (inferred from its OOMs): --capacity asks about another limit.
    FidelityOptions f;
    f.capacity = capacity_for(t, std::nullopt);
    FidelityResult fr = check_fidelity(t, f);
    if (!fr.exact && o.capacity) {
      f.capacity = capacity_for(t, o.capacity);
      FidelityResult at_given = check_fidelity(t, f);
      if (at_given.exact) fr = at_given;
    }
    r.fidelity_exact = fr.exact;
    if (!fr.exact) r.fidelity_note = fmt::format("diverges at event {}: {}", fr.event_index, fr.what);
    for (uint64_t i = 0; i < t.events.size(); ++i)
      if (t.events[i].kind == EventKind::Oom) {
        r.first_oom_time_us = t.events[i].time_us;
        r.first_oom_event = i;
        ProgramAttribution program(t);
        r.oom_request = t.events[i].size;
        r.oom_live_bytes = program.live_before(i).live_bytes;
        r.oom_step = program.step_of(i);
        r.oom_phase = phase_name(program.phase_of_event(i));
        r.oom_site = program.site_of(t.events[i]);
        break;
      }
    r.timeline = rank_timeline(t);
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
  // Against the capacity when every rank's is known; else in bytes (a ratio and a byte count do not compare).
  bool all_capacities = true;
  for (const auto& k : rep.ranks) all_capacities = all_capacities && k.run.capacity && *k.run.capacity;
  auto load = [&](size_t k) {
    const RunSummary& r = rep.ranks[k].run;
    uint64_t peak = std::max(r.recorded_peak_reserved, r.peak_reserved);
    return all_capacities ? static_cast<double>(peak) / static_cast<double>(*r.capacity) : static_cast<double>(peak);
  };
  // Without a recorded OOM, a rank whose replay runs out on the capacity given comes first.
  auto replay_fails = [&](size_t k) { return rep.ranks[k].run.ooms > 0; };
  if (!any_oom)
    for (size_t k = 1; k < rep.ranks.size(); ++k)
      if (std::make_pair(replay_fails(k), load(k)) > std::make_pair(replay_fails(limit), load(limit))) limit = k;
  rep.limit_rank = rep.ranks[limit].rank;
  const RunSummary& lr = rep.ranks[limit].run;
  if (any_oom) {
    const RankRun& k = rep.ranks[limit];
    std::string cause;
    if (lr.capacity && *lr.capacity)
      cause = k.oom_live_bytes + k.oom_request > *lr.capacity
                  ? fmt::format(
                        "{} live plus the request exceed its {} capacity: too much live memory, no "
                        "allocator setting helps",
                        format_size(k.oom_live_bytes), format_size(*lr.capacity))
                  : fmt::format(
                        "only {} live of its {} capacity: the rest was cached in blocks too small or "
                        "split (fragmentation); an allocator setting can help",
                        format_size(k.oom_live_bytes), format_size(*lr.capacity));
    else
      cause = fmt::format("{} live", format_size(k.oom_live_bytes));
    rep.limit_reason = fmt::format(
        "rank {} ran out of memory first: a {} request in {}{} (event {}, {} recorded "
        "OOMs){}; {}",
        rep.limit_rank, format_size(k.oom_request), k.oom_phase,
        k.oom_step ? fmt::format(" of step {}", k.oom_step) : std::string(), k.first_oom_event, lr.recorded_ooms,
        k.oom_site.empty() ? std::string() : " at " + k.oom_site, cause);
  } else if (replay_fails(limit)) {
    rep.limit_reason = fmt::format(
        "no rank ran out of memory in the recording; on the {} capacity rank {} would, under its recorded "
        "settings ({} allocations fail in the replay; it reserved {})",
        format_size(lr.capacity.value_or(0)), rep.limit_rank, lr.ooms, format_size(lr.recorded_peak_reserved));
  } else {
    rep.limit_reason = fmt::format("no rank ran out of memory; rank {} reserves the most ({}{})", rep.limit_rank,
                                   format_size(std::max(lr.recorded_peak_reserved, lr.peak_reserved)),
                                   lr.capacity ? " of " + format_size(*lr.capacity) : std::string());
  }
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
