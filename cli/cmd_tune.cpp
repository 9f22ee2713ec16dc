// fraglab tune TRACE [--capacity C] [--jobs N] [--json]: searches PyTorch's allocator
// settings on a trace and prints the PYTORCH_CUDA_ALLOC_CONF with the lowest predicted
// peak reserved memory, the saving against the recorded settings, the ranking of what it
// tried and whether it fits the capacity (report/tune.h has the search).
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "allocators/policy_options.h"
#include "cli/command_json.h"
#include "cli/commands.h"
#include "cli/device_arg.h"
#include "cli/progress.h"
#include "cli/stdin_input.h"
#include "report/policy_grid.h"
#include "report/tune.h"
#include "traces/trace_io.h"

namespace fraglab::cli {

namespace {

struct TuneArgs {
  std::string path;
  DeviceOptions device;  // the snapshot's device; the search replays on the simulated device only
  std::string capacity;
  std::string policy = "pytorch";
  std::vector<std::string> space;
  std::vector<std::string> also;
  unsigned jobs = 0;
  size_t keep = 3;
  size_t top = 20;
  bool json = false;
};

std::string conf_text(const std::string& conf) { return conf.empty() ? "(unset: every default)" : conf; }

std::string signed_size(int64_t bytes) {
  return (bytes < 0 ? "-" : "+") + format_size(static_cast<uint64_t>(bytes < 0 ? -bytes : bytes));
}

void print_text(const TuneReport& r, size_t top) {
  const TuneCandidate& best = r.best();
  fmt::print("trace             {}: {} events, live-bytes bound {}", r.trace, r.events,
             format_size(r.live_bytes_bound));
  if (r.recorded_peak_reserved) fmt::print(", recorded peak reserved {}", format_size(r.recorded_peak_reserved));
  fmt::print("\nrecorded settings {}{}: predicted peak reserved {}\n", conf_text(r.recorded_conf),
             r.recorded_conf_inferred ? " (inferred: the snapshot records none)" : "",
             format_size(r.recorded.peak_reserved));
  if (r.policy == "pytorch")
    fmt::print("best              PYTORCH_CUDA_ALLOC_CONF=\"{}\"\n", best.conf);
  else
    fmt::print("best              {}\n", policy_string(r.policy, best.conf));
  int64_t saving = static_cast<int64_t>(r.recorded.peak_reserved) - static_cast<int64_t>(best.peak_reserved);
  fmt::print("predicted peak    {} ({} bytes), {} against the recorded settings ({:+.1f}%)\n",
             format_size(best.peak_reserved), best.peak_reserved, signed_size(-saving),
             r.recorded.peak_reserved
                 ? -100.0 * static_cast<double>(saving) / static_cast<double>(r.recorded.peak_reserved)
                 : 0.0);
  if (!r.capacity_note.empty()) fmt::print("note              {}\n", r.capacity_note);
  if (best.recorded_ooms) {
    if (best.recorded_ooms_failed() == 0)
      fmt::print(
          "recorded OOMs     all {} would have been served under the best setting (the recorded one serves {})\n",
          best.recorded_ooms, r.recorded.recorded_ooms_served);
    else if (r.oom_live_excess)
      fmt::print(
          "recorded OOMs     no setting serves them all: the best serves {} of {}; at the worst OOM the live "
          "bytes exceed the capacity by {} (reduce the batch by about {:.0f}%)\n",
          best.recorded_ooms_served, best.recorded_ooms, format_size(r.oom_live_excess),
          r.capacity && *r.capacity
              ? 100.0 * static_cast<double>(r.oom_live_excess) / static_cast<double>(*r.capacity + r.oom_live_excess)
              : 0.0);
    else
      fmt::print(
          "recorded OOMs     no setting tried serves them all: the best serves {} of {}. The live bytes fit the "
          "capacity at every one ({} to spare at the tightest): fragmentation, rounding and segment sizes take "
          "the rest (`fraglab diagnose` shows where the free bytes lie)\n",
          best.recorded_ooms_served, best.recorded_ooms, format_size(r.oom_live_room));
  }
  if (r.capacity)
    fmt::print("capacity          {}: {}\n", format_size(*r.capacity),
               r.fits()    ? "fits"
               : best.ooms ? fmt::format("does NOT fit ({} allocations fail)", best.ooms)
                           : "does NOT fit");
  else
    fmt::print(
        "capacity          unlimited (give --capacity to check a fit and search garbage_collection_threshold)\n");
  fmt::print("search            {} settings replayed of {} in the full grid, {:.2f} s on {} threads\n\n",
             r.ranking.size(), r.search_space_size, r.seconds, r.threads);
  fmt::print("{:>4}  {:>13}  {:>12}  {:>8}  {:>5}  {:<8}  {}\n", "rank", "peak reserved", "vs recorded", "dev calls",
             "OOMs", "stage", r.policy == "pytorch" ? "PYTORCH_CUDA_ALLOC_CONF" : "options");
  for (size_t i = 0; i < r.ranking.size(); ++i) {
    const auto& c = r.ranking[i];
    bool is_recorded = c.conf == r.recorded.conf;
    if (i >= top && !is_recorded) continue;
    fmt::print("{:>4}  {:>13}  {:>12}  {:>9}  {:>5}  {:<8}  {}{}\n", i + 1, format_size(c.peak_reserved),
               signed_size(static_cast<int64_t>(c.peak_reserved) - static_cast<int64_t>(r.recorded.peak_reserved)),
               c.device_calls, c.ooms, c.stage, conf_text(c.conf), is_recorded ? "   <- recorded" : "");
  }
  if (r.ranking.size() > top) fmt::print("      ({} more: --top or --json for all)\n", r.ranking.size() - top);
}

int run_tune(const TuneArgs& a) {
  TuneOptions o;
  o.policy = a.policy;
  for (const auto& d : a.space) o.space.push_back(parse_dimension(d));
  if (o.space.empty() && o.policy != "pytorch")
    throw std::invalid_argument("--space is needed to tune a policy other than pytorch");
  if (!a.capacity.empty()) o.capacity = sim_config(a.capacity).capacity;
  o.also = a.also;
  o.jobs = a.jobs;
  o.keep_per_dimension = a.keep;
  Progress progress("tune: replaying allocator settings");
  TuneReport r = tune(a.path, o, a.device.simulated_trace_device("tune replays on the simulated device"));
  progress.done();
  if (a.json)
    fmt::print("{}\n", tune_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  else
    print_text(r, a.top);
  return r.fits() ? 0 : 1;
}

}  // namespace

void add_tune(CLI::App& app, CommandFn& run) {
  static TuneArgs a;
  auto* cmd = app.add_subcommand("tune", "Search PyTorch's allocator settings (PYTORCH_CUDA_ALLOC_CONF) for a trace");
  dash_reads_stdin(cmd->add_option("trace", a.path, "Trace file: " + format_list()))->required();
  cmd->add_option(
      "--capacity", a.capacity,
      "Device capacity (set_per_process_memory_fraction x memory), e.g. 20GiB; exit 1 when the best does not fit");
  cmd->add_option("-j,--jobs", a.jobs, "Threads (default: every core)");
  cmd->add_option("--policy", a.policy, "Policy whose options are searched (default pytorch)");
  cmd->add_option("--space", a.space,
                  "Replace the search space: KEY:{VALUE,...} per option, 'unset' for the default; repeatable");
  cmd->add_option("--try", a.also, "Also replay and rank this setting, e.g. 'max_split_size_mb:128'; repeatable");
  cmd->add_option("--keep", a.keep, "Values of each option carried from the sweep into the combined search")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--top", a.top, "Rows of the ranking to print");
  cmd->add_flag("--json", a.json, "Print JSON (every setting tried)");
  add_device_options(cmd, a.device);
  cmd->callback([&run] { run = [] { return run_tune(a); }; });
}

}  // namespace fraglab::cli
