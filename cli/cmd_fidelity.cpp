// fraglab fidelity TRACE [--capacity C] [--policy P] [--json]: replays a recorded PyTorch
// trace with the `pytorch` policy under the recorded settings and checks that the model
// makes the same device calls and holds the same reserved bytes after every event.
// Exit 0 when exact, 1 on the first divergence (printed with the events around it), 2 when
// the trace records no device calls of its allocator (an RMM log: requests only), so there is
// nothing to compare.
#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "allocators/policy_options.h"
#include "cli/command_json.h"
#include "cli/commands.h"
#include "cli/device_arg.h"
#include "cli/progress.h"
#include "cli/stdin_input.h"
#include "import/trace_import.h"
#include "sim/capacity.h"
#include "sim/fidelity.h"
#include "traces/trace_io.h"

namespace fraglab::cli {

namespace {

struct FidelityArgs {
  std::string path, capacity, policy = "pytorch";
  bool json = false, no_hints = false;
  DeviceOptions device;  // the snapshot's device; the check runs on the simulated device only
};

int run_fidelity(const FidelityArgs& args) {
  const int device = args.device.simulated_trace_device(
      "fidelity checks the model on the simulated device (replay --device cuda runs it on a GPU; the snapshot's GPU is --gpu)");
  Trace trace = load_trace(args.path, ReadOptions{device});
  if (auto refusal = fidelity_refusal(trace, args.path)) {
    fmt::print(stderr, "fraglab: {}\n", *refusal);
    return 2;
  }
  Progress progress("fidelity: replaying the recording under the model");
  FidelityRun run = run_fidelity_check(trace, args.policy, args.capacity, !args.no_hints);
  progress.done();
  if (!run.capacity_note.empty() && !args.json) fmt::print(stderr, "note: {}\n", run.capacity_note);
  if (!args.json)
    for (const SkippedAction& k : trace.meta.skipped_actions)
      fmt::print(stderr, "note: recorded with skip_actions, no {}: {}\n", k.action, k.reading);
  const FidelityResult& r = run.result;
  if (args.json) {
    fmt::print("{}\n", fidelity_json(args.path, run).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else if (r.exact) {
    fmt::print(
        "exact: {} events replayed, {} device calls and {} reserved-byte values compared, {} OOMs; "
        "peak reserved {} bytes (recorded {})\n",
        r.replay_events, r.device_calls, r.reserved_checks, r.ooms, r.simulated_peak, r.recorded_peak);
  } else {
    fmt::print("DIVERGED at event {}: {}\n", r.event_index, r.what);
    for (const auto& line : r.context) fmt::print("  {}\n", line);
    fmt::print("(agreed before that: {} events, {} device calls, {} reserved-byte values)\n", r.replay_events,
               r.device_calls, r.reserved_checks);
  }
  return r.exact ? 0 : 1;
}

}  // namespace

void add_fidelity(CLI::App& app, CommandFn& run) {
  auto args = std::make_shared<FidelityArgs>();
  auto* cmd =
      app.add_subcommand("fidelity", "check a policy's model against a recorded allocator trace, call for call");
  dash_reads_stdin(cmd->add_option("trace", args->path,
                                   "recorded trace with the allocator's device calls (a PyTorch snapshot, or a "
                                   "trace converted from one); formats: " +
                                       format_list()))
      ->required();
  cmd->add_option("--capacity", args->capacity,
                  "the recording's memory limit (set_per_process_memory_fraction x total memory), e.g. 17003498700");
  cmd->add_option("--policy", args->policy, "the model to check (default: pytorch under the recorded settings)");
  add_device_options(cmd, args->device);
  cmd->add_flag("--json", args->json, "machine-readable result");
  cmd->add_flag("--no-address-hints", args->no_hints, "place segments at synthetic addresses, not the recorded ones");
  cmd->callback([&run, args] { run = [args] { return run_fidelity(*args); }; });
}

}  // namespace fraglab::cli
