// fraglab ranks DIR|FILES...: one job's per-rank snapshots read together (report/ranks.h).
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/progress.h"
#include "report/ranks.h"
#include "report/ranks_html.h"
#include "traces/io/atomic_file.h"
#include "traces/units.h"

namespace fraglab::cli {

namespace {

struct RanksArgs {
  std::vector<std::string> inputs;
  std::string capacity, html;
  unsigned jobs = 0;
  size_t top = 6;
  bool json = false, no_search = false;
};

nlohmann::json groups_json(const std::vector<GroupDiff>& groups, size_t top) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < groups.size() && i < top; ++i)
    out.push_back({{"key", groups[i].key},
                   {"live_lightest", groups[i].a.live_at_peak},
                   {"live_limit_rank", groups[i].b.live_at_peak},
                   {"delta_live", groups[i].delta_live_at_peak()},
                   {"delta_bytes", groups[i].delta_bytes()}});
  return out;
}

nlohmann::json report_json(const RanksReport& r, size_t top) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& k : r.ranks)
    ranks.push_back({{"rank", k.rank},
                     {"path", k.path},
                     {"device", k.device},
                     {"events", k.run.events},
                     {"recorded_conf", k.run.recorded_conf},
                     {"recorded_peak_reserved", k.run.recorded_peak_reserved},
                     {"peak_reserved", k.run.peak_reserved},
                     {"peak_allocated", k.run.peak_allocated},
                     {"live_bytes_bound", k.run.live_bytes_bound},
                     {"capacity", k.run.capacity ? nlohmann::json(*k.run.capacity) : nlohmann::json(nullptr)},
                     {"recorded_ooms", k.run.recorded_ooms},
                     {"free_at_peak", k.run.at_peak.free_bytes},
                     {"largest_free_at_peak", k.run.at_peak.largest_free},
                     {"fidelity_exact", k.fidelity_exact},
                     {"fidelity_note", k.fidelity_note},
                     {"first_oom", k.first_oom_time_us == INT64_MAX ? nlohmann::json(nullptr)
                                                                    : nlohmann::json{{"event_index", k.first_oom_event},
                                                                                     {"request", k.oom_request},
                                                                                     {"live_bytes", k.oom_live_bytes},
                                                                                     {"step", k.oom_step},
                                                                                     {"phase", k.oom_phase},
                                                                                     {"site", k.oom_site}}}});
  nlohmann::json div = nlohmann::json::array();
  for (const auto& d : r.divergence)
    div.push_back({{"rank", d.rank},
                   {"same_as_reference", d.same},
                   {"allocs", d.allocs},
                   {"reference_allocs", d.reference_allocs},
                   {"first_different_alloc", d.same ? nlohmann::json(nullptr) : nlohmann::json(d.alloc_ordinal)},
                   {"event_index", d.same ? nlohmann::json(nullptr) : nlohmann::json(d.event_index)},
                   {"size", d.size},
                   {"reference_size", d.reference_size}});
  return {{"ranks", ranks},
          {"divergence", div},
          {"limit_rank", r.limit_rank},
          {"limit_reason", r.limit_reason},
          {"extra_by_site", groups_json(r.extra_by_site, top)},
          {"extra_by_category", groups_json(r.extra_by_category, top)},
          {"fits_all",
           {{"conf", r.fits_all_conf},
            {"env", "PYTORCH_CUDA_ALLOC_CONF=" + r.fits_all_conf},
            {"fits", r.fits_all},
            {"worst_peak_reserved", r.fits_all_worst_peak},
            {"settings_tried", r.settings_tried},
            {"capacities_known", r.capacities_known},
            {"beyond_any_setting", [&] {
               nlohmann::json b = nlohmann::json::array();
               for (const auto& [rank, excess] : r.beyond_any_setting)
                 b.push_back({{"rank", rank}, {"live_excess_bytes", excess}});
               return b;
             }()}}}};
}

void print_groups(const char* what, const std::vector<GroupDiff>& groups, size_t top) {
  if (groups.empty()) return;
  fmt::print("  by {}:\n", what);
  for (size_t i = 0; i < groups.size() && i < top; ++i) {
    int64_t d = groups[i].delta_live_at_peak();
    if (d == 0 && i > 0) break;
    fmt::print("    {:>11} live at the peak  {}\n",
               (d < 0 ? "-" : "+") + format_size(static_cast<uint64_t>(d < 0 ? -d : d)), groups[i].key);
  }
}

void print_text(const RanksReport& r, size_t top) {
  fmt::print("{:>5}  {:>6}  {:>12}  {:>12}  {:>12}  {:>12}  {:>5}  {}\n", "rank", "device", "recorded peak",
             "replay peak", "live bound", "capacity", "OOMs", "fidelity");
  for (const auto& k : r.ranks)
    fmt::print("{:>5}  {:>6}  {:>12}  {:>12}  {:>12}  {:>12}  {:>5}  {}\n", k.rank, k.device,
               format_size(k.run.recorded_peak_reserved), format_size(k.run.peak_reserved),
               format_size(k.run.live_bytes_bound), k.run.capacity ? format_size(*k.run.capacity) : "unlimited",
               k.run.recorded_ooms, k.fidelity_exact ? "exact" : k.fidelity_note);
  for (const auto& d : r.divergence) {
    if (d.same)
      fmt::print("rank {} made the same {} allocations as rank {}\n", d.rank, d.allocs, r.ranks.front().rank);
    else
      fmt::print("rank {} first differs from rank {} at its allocation {} (event {}): {} against {}\n", d.rank,
                 r.ranks.front().rank, d.alloc_ordinal, d.event_index, format_size(d.size),
                 format_size(d.reference_size));
  }
  fmt::print("\nthe limit: {}\n", r.limit_reason);
  if (!r.extra_by_site.empty() || !r.extra_by_category.empty()) {
    fmt::print("what rank {} holds beyond the lightest rank:\n", r.limit_rank);
    print_groups("category", r.extra_by_category, top);
    print_groups("call site", r.extra_by_site, top);
  }
  if (r.settings_tried) {
    const char* verdict = !r.capacities_known ? "the lowest worst-rank peak; no capacity known: give --capacity"
                          : r.fits_all        ? "fits every rank"
                                              : "no setting fits every rank: the least bad";
    fmt::print(
        "\none setting for every rank: PYTORCH_CUDA_ALLOC_CONF=\"{}\" ({}; worst rank's peak {}; {} settings "
        "tried)\n",
        r.fits_all_conf, verdict, format_size(r.fits_all_worst_peak), r.settings_tried);
    bool cut_short = false;
    for (const auto& k : r.ranks) cut_short = cut_short || k.first_oom_time_us != INT64_MAX;
    if (cut_short && r.fits_all)
      fmt::print(
          "  (for what was recorded: a snapshot that ends at an OOM does not show what the rest of that step needs; "
          "for the whole job, record it to the end on more memory and ask with --capacity)\n");
    for (const auto& [rank, excess] : r.beyond_any_setting)
      fmt::print(
          "rank {}: its live bytes at its OOM exceed the capacity by {}: no setting fits it; that rank needs "
          "less live memory (a smaller batch there: fraglab fit)\n",
          rank, format_size(excess));
  }
}

}  // namespace

void add_ranks(CLI::App& app, CommandFn& run) {
  static RanksArgs a;
  auto* cmd = app.add_subcommand("ranks",
                                 "One job's per-rank snapshots together: each rank's peak, OOMs and fidelity, where "
                                 "ranks diverge, which rank reaches the limit first and why, one setting for all");
  cmd->add_option("inputs", a.inputs,
                  "Snapshots, one per rank (rank N named by 'rankN' in the file name), or a "
                  "directory of them")
      ->required();
  cmd->add_option("--capacity", a.capacity, "Each rank's device capacity (default: each rank's, from its OOMs)");
  cmd->add_option("-j,--jobs", a.jobs, "Threads for the settings search (default: every core)");
  cmd->add_option("--top", a.top, "Rows per list");
  cmd->add_flag("--no-search", a.no_search, "Skip the settings search");
  cmd->add_flag("--json", a.json, "Print JSON");
  cmd->add_option("--html", a.html,
                  "Also write a self-contained HTML page: every job's ranks, their timelines overlaid, the limit");
  cmd->callback([&run] {
    run = [] {
      refuse_output_over_input(a.inputs, "--html", a.html);
      for (const auto& in : a.inputs)
        if (in == "-")
          throw std::invalid_argument(
              "ranks reads one snapshot per rank, each a file named by its rank (rankN): standard input ('-') is "
              "one stream and names no rank; give the files or their directory");
      RanksOptions o;
      if (!a.capacity.empty()) o.capacity = parse_size(a.capacity);
      o.jobs = a.jobs;
      o.search = !a.no_search;
      auto jobs = rank_jobs(a.inputs);
      nlohmann::json all = nlohmann::json::array();
      std::vector<std::pair<std::string, RanksReport>> reports;
      for (const auto& [job, files] : jobs) {
        Progress progress(fmt::format("ranks: job {}: reading and replaying {} ranks", job, files.size()));
        RanksReport r = read_ranks(files, o);
        progress.done();
        if (!a.html.empty()) reports.emplace_back(job, r);
        if (a.json) {
          nlohmann::json j = report_json(r, a.top);
          j["job"] = job;
          all.push_back(j);
        } else {
          if (jobs.size() > 1) fmt::print("{}== job {} ({} snapshots)\n", all.empty() ? "" : "\n", job, files.size());
          all.push_back(nullptr);
          print_text(r, a.top);
        }
      }
      if (!a.html.empty()) {
        std::string command = "fraglab ranks";
        for (const auto& in : a.inputs) command += " " + in;
        AtomicFile out(a.html);
        out.write(ranks_html(reports, command));
        out.commit();
      }
      if (a.json)
        fmt::print("{}\n",
                   nlohmann::json{{"schema_version", kJsonSchemaVersion}, {"command", "ranks"}, {"jobs", all}}.dump(
                       2, ' ', false, nlohmann::json::error_handler_t::replace));
      return 0;
    };
  });
}

}  // namespace fraglab::cli
