// fraglab export TRACE --policy P --to snapshot|perfetto OUT: the trace replayed through
// one policy, written for PyTorch's memory_viz (a memory snapshot) or Perfetto.
#include <fmt/core.h>

#include "allocators/policy_options.h"
#include "allocators/registry.h"
#include "cli/commands.h"
#include "cli/device_arg.h"
#include "cli/progress.h"
#include "cli/stdin_input.h"
#include "import/trace_import.h"
#include "sim/capacity.h"
#include "sim/export.h"
#include "traces/trace_io.h"

namespace fraglab::cli {

namespace {

struct ExportArgs {
  std::string trace, out, policy = "bestfit", to, capacity;
  DeviceOptions device;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string target_format(const ExportArgs& a) {
  if (!a.to.empty()) return a.to;
  if (ends_with(a.out, ".pickle") || ends_with(a.out, ".pickle.gz") || ends_with(a.out, ".pkl")) return "snapshot";
  if (ends_with(a.out, ".json")) return "perfetto";
  throw std::invalid_argument("cannot tell the export format from '" + a.out + "': use --to snapshot|perfetto");
}

int run_export(const ExportArgs& a) {
  refuse_output_over_input({a.trace}, "output", a.out);
  std::string format = target_format(a);
  Progress progress("export: reading the trace");
  Trace trace = load_trace(a.trace, {a.device.resolve().trace_device});
  PolicySpec spec = PolicySpec::parse(a.policy);
  SimDeviceConfig config = sim_config(a.capacity);
  // As replay: a recording that ran under a limit is exported under it (its OOMs, its retries).
  std::string note;
  config.capacity = capacity_for(trace, config.capacity, &note);
  progress.stage("export: replaying under " + spec.text + ", writing " + a.out);
  ExportSummary s =
      format == "snapshot" ? export_snapshot(trace, spec, config, a.out) : export_perfetto(trace, spec, config, a.out);
  progress.done();  // before anything is printed (the note too)
  if (!note.empty()) fmt::print(stderr, "note: {}\n", note);
  fmt::print("wrote {} ({} {}) : {} under {}, peak reserved {}, peak allocated {}{}\n", a.out, s.records,
             format == "snapshot" ? "trace entries" : "trace events", a.trace, spec.text,
             format_size(s.result.reserved.bytes), format_size(s.result.allocated.bytes),
             s.result.ooms.empty() ? "" : fmt::format(", {} allocations failed (oom entries)", s.result.ooms.size()));
  return 0;
}

}  // namespace

void add_export(CLI::App& app, CommandFn& run) {
  static ExportArgs a;
  auto* cmd = app.add_subcommand(
      "export", "Replay a trace through a policy and write it for PyTorch's memory_viz (snapshot) or Perfetto");
  dash_reads_stdin(cmd->add_option("trace", a.trace, "Trace file: " + format_list()))->required();
  cmd->add_option("output", a.out, "Output: .pickle[.gz] (snapshot) or .json (perfetto)")->required();
  cmd->add_option("-p,--policy", a.policy, "Policy with options, e.g. bestfit (default)");
  cmd->add_option("--to", a.to, "snapshot or perfetto (default: from the output's extension)")
      ->check(CLI::IsMember({"snapshot", "perfetto"}));
  cmd->add_option("--capacity", a.capacity,
                  "Device capacity, e.g. 80GiB (default: the limit a recording ran under, inferred; else unlimited)");
  add_device_options(cmd, a.device, false);
  cmd->callback([&run] { run = [] { return run_export(a); }; });
}

}  // namespace fraglab::cli
