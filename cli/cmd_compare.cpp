// fraglab compare PATHS... --policies LIST [--grid G] [--jobs N] [--capacity C] [--shard K/N] [-o DIR]:
// every trace x every policy configuration on the simulated device, in parallel, written
// as CSV, JSON, an HTML report and a Markdown summary (report/).
#include <fmt/core.h>
#include <unistd.h>

#include <mutex>
#include <utility>

#include "allocators/registry.h"
#include "cli/commands.h"
#include "cli/report_options.h"
#include "cli/stdin_input.h"
#include "report/compare_run.h"
#include "report/corpus.h"
#include "report/policy_grid.h"
#include "report/ranks.h"
#include "report/report_output.h"

namespace fraglab::cli {

namespace {

struct CompareArgs {
  std::vector<std::string> paths;
  std::vector<std::string> policies;
  std::vector<std::string> grids;
  unsigned jobs = 0;
  std::string capacity;
  std::string addresses = "auto";
  std::string pools;  // --pools: separate|merge for every configuration that does not say
  std::string shard;
  ReportPaths out;
  bool quiet = false, ranks = false;
};

// Shell-quotes an argument for the command line shown in the reports.
std::string quoted(const std::string& s) {
  if (s.find_first_of(" '\"*?{}[]$;&|<>()\\,") == std::string::npos && !s.empty()) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_line(const CompareArgs& a) {
  std::string cmd = "fraglab compare";
  for (const auto& p : a.paths) cmd += " " + quoted(p);
  if (!a.policies.empty()) {
    cmd += " --policies";
    for (const auto& p : a.policies) cmd += " " + quoted(p);
  }
  for (const auto& g : a.grids) cmd += " --grid " + quoted(g);
  if (!a.capacity.empty()) cmd += " --capacity " + a.capacity;
  if (a.addresses != "cuda") cmd += " --addresses " + a.addresses;
  if (!a.pools.empty()) cmd += " --pools " + a.pools;
  if (!a.shard.empty()) cmd += " --shard " + a.shard;
  if (!a.out.dir.empty()) cmd += " -o " + quoted(a.out.dir);
  return cmd;
}

// A one-line bar redrawn in place; only when stderr is a terminal, so logs stay clean.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO)) {}
  ~ProgressBar() {
    if (drawn_) fmt::print(stderr, "\n");
  }
  void update(size_t done, size_t total, const std::string& trace, const std::string& policy) {
    if (!enabled_) return;
    const size_t width = 30, filled = total ? done * width / total : width;
    std::string what = trace_display_name(trace) + " x " + policy;
    if (what.size() > 50) what = what.substr(0, 47) + "...";
    fmt::print(stderr, "\r[{}{}] {}/{} {:<50}", std::string(filled, '#'), std::string(width - filled, ' '), done, total,
               what);
    std::fflush(stderr);
    drawn_ = true;
  }

 private:
  bool enabled_, drawn_ = false;
};

int run_compare_command(const CompareArgs& a) {
  CompareOptions o;
  o.policies = expand_policy_list(a.policies, a.grids);
  if (!a.pools.empty()) o.policies = with_pool_mode(std::move(o.policies), a.pools);
  o.traces = expand_corpus(a.paths);
  for (const auto& [option, path] : {std::pair<const char*, const std::string&>{"--csv", a.out.csv},
                                     {"--json", a.out.json},
                                     {"--timings", a.out.timings},
                                     {"--html", a.out.html},
                                     {"--md", a.out.md},
                                     {"-o", a.out.dir}})
    refuse_output_over_input(o.traces, option, path);
  if (!a.out.dir.empty())
    for (const char* name : {"results.csv", "results.json", "timings.json", "report.html", "summary.md"})
      refuse_output_over_input(o.traces, "-o", a.out.dir + "/" + name);
  if (!a.capacity.empty()) o.capacity = sim_config(a.capacity).capacity;
  o.addresses = sim_config("", a.addresses).addresses;
  if (!a.shard.empty()) o.shard = ShardId::parse(a.shard);
  o.jobs = a.jobs;
  ProgressBar bar(!a.quiet);
  o.progress = [&bar](size_t done, size_t total, const std::string& t, const std::string& p) {
    bar.update(done, total, t, p);
  };
  CompareResults results = run_compare(o);
  std::string md = write_reports(results, a.out, command_line(a));
  if (!a.out.any()) fmt::print("{}", md);
  if (a.ranks) {  // after the table: each rank set's rows and the job's worst rank
    std::string sets = rank_sets_markdown(results);
    fmt::print("{}\n", sets.empty() ? "\nno rank sets among the traces (files named ...rankN...)" : sets);
  } else if (!a.quiet)
    fmt::print("{} traces x {} policies{}: {} replays written\n", o.traces.size(), o.policies.size(),
               o.shard ? fmt::format(" (shard {}/{})", o.shard->index, o.shard->count) : "", results.rows.size());
  return 0;
}

}  // namespace

void add_report_outputs(CLI::App* cmd, ReportPaths& out) {
  cmd->add_option("-o,--output", out.dir,
                  "Directory for results.csv, results.json, timings.json, report.html and summary.md");
  cmd->add_option("--csv", out.csv, "Write the results table as CSV here");
  cmd->add_option("--json", out.json, "Write the results as JSON here (input of fraglab merge)");
  cmd->add_option("--timings", out.timings, "Write replay times as JSON here (not reproducible, so kept apart)");
  cmd->add_option("--html", out.html, "Write the self-contained HTML report here");
  cmd->add_option("--md", out.md, "Write the Markdown summary here");
}

void add_compare(CLI::App& app, CommandFn& run) {
  static CompareArgs a;
  auto* cmd = app.add_subcommand("compare", "Replay every trace of a corpus with every policy and compare them");
  dash_reads_stdin(
      cmd->add_option("paths", a.paths, "Trace files, directories (searched recursively) or glob patterns"))
      ->required();
  cmd->add_option("-p,--policies", a.policies,
                  "Policy configurations: names ('bestfit,passthrough'), strings with options "
                  "('pytorch:expandable_segments:True'), 'all' for every registered policy")
      ->take_all();
  cmd->add_option("--grid", a.grids,
                  "Option grid with brace sets, e.g. 'pytorch:max_split_size_mb:{64,128,256}'; repeatable");
  cmd->add_option("-j,--jobs", a.jobs, "Worker threads (default: every core)");
  add_addresses_option(cmd, a.addresses);
  add_pools_option(cmd, a.pools);
  cmd->add_option(
      "--capacity", a.capacity,
      "Device capacity, e.g. 80GiB (default unlimited); failed allocations are counted as OOMs and skipped");
  cmd->add_option("--shard", a.shard, "Run only slice K of N of the trace x policy matrix (K/N), for fraglab merge");
  add_report_outputs(cmd, a.out);
  cmd->add_flag("-q,--quiet", a.quiet, "No progress bar or summary line");
  cmd->add_flag("--ranks", a.ranks,
                "Also print, per job of several ranks (files named ...rankN...), each rank's peak reserved per "
                "policy and the job's worst rank");
  cmd->callback([&run] { run = [] { return run_compare_command(a); }; });
}

}  // namespace fraglab::cli
