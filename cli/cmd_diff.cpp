// fraglab diff A B [--policy P] [--capacity C] [--top N] [--json]: two traces side by side
// (two runs, two steps, two ranks): recorded and replayed peaks, fragmentation at each peak,
// device calls, and allocations by call site, size class and stream with the largest
// differences first (report/trace_diff.h). Two directories of one job's per-rank snapshots each (rank sets):
// rank N against rank N.
#include <fmt/core.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "allocators/policy_options.h"
#include "cli/command_json.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/stdin_input.h"
#include "report/ranks.h"
#include "report/trace_diff.h"

namespace fraglab::cli {

namespace {

struct DiffArgs {
  std::string a, b, policy = "pytorch", capacity;
  size_t top = 10;
  bool json = false;
};

std::string signed_size(int64_t bytes) {
  return (bytes < 0 ? "-" : "+") + format_size(static_cast<uint64_t>(bytes < 0 ? -bytes : bytes));
}

std::string percent(uint64_t a, uint64_t b) {
  return a ? fmt::format(" ({:+.1f}%)", 100.0 * static_cast<double>(signed_delta(a, b)) / static_cast<double>(a)) : "";
}

// One row of the side-by-side table: a byte count in both runs and their difference.
void bytes_row(const char* what, uint64_t a, uint64_t b) {
  fmt::print("{:<24} {:>26} {:>26} {:>22}\n", what, fmt::format("{} ({})", format_size(a), a),
             fmt::format("{} ({})", format_size(b), b), signed_size(signed_delta(a, b)) + percent(a, b));
}

void count_row(const char* what, uint64_t a, uint64_t b) {
  fmt::print("{:<24} {:>26} {:>26} {:>22}\n", what, a, b, fmt::format("{:+}", signed_delta(a, b)) + percent(a, b));
}

void text_row(const char* what, const std::string& a, const std::string& b) {
  fmt::print("{:<24} {:>26} {:>26}\n", what, a, b);
}

std::string fragmentation_text(const Fragmentation& f) {
  return fmt::format("{:.3f} of {}", f.external(), format_size(f.free_bytes));
}

void print_groups(const char* title, const std::vector<GroupDiff>& groups, size_t top) {
  fmt::print("\nby {} ({} groups, largest difference first: bytes live at the live peak, then bytes allocated)\n",
             title, groups.size());
  fmt::print("  {:>12} {:>12} {:>12}  {:>12} {:>9}  {}\n", "live A", "live B", "delta live", "delta bytes", "delta n",
             "group");
  for (size_t i = 0; i < groups.size() && i < top; ++i) {
    const auto& g = groups[i];
    fmt::print("  {:>12} {:>12} {:>12}  {:>12} {:>+9}  {}\n", format_size(g.a.live_at_peak),
               format_size(g.b.live_at_peak), signed_size(g.delta_live_at_peak()), signed_size(g.delta_bytes()),
               g.delta_allocs(), g.key);
  }
  if (groups.size() > top) fmt::print("  ({} more: --top or --json)\n", groups.size() - top);
}

void print_text(const TraceDiff& d, size_t top) {
  const RunSummary &a = d.a, &b = d.b;
  fmt::print("A  {}\nB  {}\n", a.trace, b.trace);
  auto device = [](const std::optional<uint64_t>& c) {
    return c ? "a simulated device of " + format_size(*c) : std::string("an unlimited simulated device");
  };
  if (d.capacity || a.capacity == b.capacity)
    fmt::print("replayed under {} on {}{}\n\n", d.policy, device(a.capacity),
               d.capacity || !a.capacity ? "" : " (the limit both recordings' OOMs show)");
  else
    fmt::print("replayed under {}, each on the limit its recording's OOMs show: A on {}, B on {}\n\n", d.policy,
               device(a.capacity), device(b.capacity));
  fmt::print("{:<24} {:>26} {:>26} {:>22}\n", "", "A", "B", "B - A");
  auto conf = [](const std::string& c) { return c.empty() ? std::string("(default)") : c; };
  text_row("recorded settings", conf(a.recorded_conf), conf(b.recorded_conf));
  count_row("replay events", a.events, b.events);
  count_row("allocations", a.allocs, b.allocs);
  bytes_row("live-bytes bound", a.live_bytes_bound, b.live_bytes_bound);
  bytes_row("recorded peak reserved", a.recorded_peak_reserved, b.recorded_peak_reserved);
  count_row("recorded device calls", a.recorded_device_calls, b.recorded_device_calls);
  if (a.recorded_ooms || b.recorded_ooms) count_row("recorded OOMs", a.recorded_ooms, b.recorded_ooms);
  bytes_row("peak reserved (replay)", a.peak_reserved, b.peak_reserved);
  bytes_row("peak allocated", a.peak_allocated, b.peak_allocated);
  bytes_row("free at reserved peak", a.at_peak.free_bytes, b.at_peak.free_bytes);
  bytes_row("largest free range", a.at_peak.largest_free, b.at_peak.largest_free);
  text_row("fragmentation at peak", fragmentation_text(a.at_peak), fragmentation_text(b.at_peak));
  count_row("device calls (replay)", a.calls.total(), b.calls.total());
  if (a.ooms || b.ooms) count_row("OOMs (replay)", a.ooms, b.ooms);
  if (a.groups.has_stacks || b.groups.has_stacks)
    print_groups("call site", d.by_site, top);
  else
    fmt::print("\nby call site: no stacks recorded (record with context=\"alloc\", stacks=\"python\")\n");
  print_groups("size class", d.by_size_class, top);
  print_groups("stream", d.by_stream, top);
  print_groups("category (parameters, activations, ...: inferred from stacks and lifetimes)", d.by_category, top);
}

}  // namespace

void add_diff(CLI::App& app, CommandFn& run) {
  static DiffArgs a;
  auto* cmd = app.add_subcommand("diff",
                                 "Compare two traces (runs, steps, ranks): peaks, fragmentation, device calls, "
                                 "allocations by call site, size class and stream");
  dash_reads_stdin(
      cmd->add_option("a", a.a,
                      "First trace (A), or a rank set: a directory of one job's per-rank snapshots, or DIR/JOB (the "
                      "job's files DIR/JOB_rankN.*)"))
      ->required();
  dash_reads_stdin(cmd->add_option("b", a.b, "Second trace (B), or a rank set to pair with A's rank by rank"))
      ->required();
  cmd->add_option("--policy", a.policy,
                  "Policy both are replayed under (default pytorch: each trace's recorded settings; "
                  "pytorch:recorded_settings=false for the same settings)");
  cmd->add_option("--capacity", a.capacity,
                  "Simulated device capacity for both, e.g. 20GiB (default: each the limit its recording's OOMs show, "
                  "as replay infers it; unlimited where none)");
  cmd->add_option("--top", a.top, "Rows per grouping in the text output");
  cmd->add_flag("--json", a.json, "Print JSON: objects a, b and delta, and every group");
  cmd->callback([&run] {
    run = [] {
      DiffOptions o;
      o.policy = a.policy;
      if (!a.capacity.empty()) o.capacity = sim_config(a.capacity).capacity;
      std::error_code ec;
      auto set_like = [&ec](const std::string& p) {  // a directory, or DIR/JOB naming no file
        return std::filesystem::is_directory(p, ec) || !std::filesystem::exists(p, ec);
      };
      if (set_like(a.a) && set_like(a.b)) {
        // Two rank sets (a directory of one job's per-rank snapshots each): rank N of A against rank N of B.
        auto sa = rank_set({a.a}), sb = rank_set({a.b});
        if (sa.size() != sb.size())
          throw std::invalid_argument(fmt::format("{} holds {} ranks and {} holds {}: rank sets pair rank by rank", a.a,
                                                  sa.size(), a.b, sb.size()));
        std::vector<TraceDiff> diffs;
        Progress progress("diff: replaying rank pairs");
        for (size_t i = 0; i < sa.size(); ++i) {
          progress.stage(fmt::format("diff: rank {} ({} of {})", sa[i].first, i + 1, sa.size()));
          if (sa[i].first != sb[i].first)
            throw std::invalid_argument(
                fmt::format("{} has rank {} where {} has rank {}", a.a, sa[i].first, a.b, sb[i].first));
          diffs.push_back(diff_traces(sa[i].second, sb[i].second, o));
        }
        progress.done();
        if (a.json) {
          nlohmann::json all = nlohmann::json::array();
          for (size_t i = 0; i < diffs.size(); ++i) {
            nlohmann::json j = diff_json(diffs[i]);
            j["rank"] = sa[i].first;
            all.push_back(j);
          }
          fmt::print(
              "{}\n",
              nlohmann::json{{"schema_version", kJsonSchemaVersion}, {"command", "diff"}, {"ranks", all}}.dump(2));
        } else {
          for (size_t i = 0; i < diffs.size(); ++i) {
            fmt::print("{}== rank {}: {} against {}\n", i ? "\n" : "", sa[i].first, sa[i].second, sb[i].second);
            print_text(diffs[i], a.top);
          }
        }
        return 0;
      }
      Progress progress("diff: replaying both traces");
      TraceDiff d = diff_traces(a.a, a.b, o);
      progress.done();
      if (a.json)
        fmt::print("{}\n", diff_json(d).dump(2));
      else
        print_text(d, a.top);
      return 0;
    };
  });
}

}  // namespace fraglab::cli
