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
#include "cli/commands.h"
#include "cli/device_arg.h"
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

// The device calls fidelity compares: segment events in the history, or at least the
// allocator's final segments (which a history that began late explains the calls by).
bool records_device_calls(const Trace& trace) {
  if (!trace.meta.segments.empty()) return true;
  for (const Event& e : trace.events)
    if (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentMap ||
        e.kind == EventKind::SegmentUnmap)
      return true;
  return false;
}

int run_fidelity(const FidelityArgs& args) {
  const int device = args.device.simulated_trace_device(
      "fidelity checks the model on the simulated device (replay --device cuda runs it on a GPU)");
  Trace trace = load_trace(args.path, ReadOptions{device});
  if (trace.meta.format == "pytorch-snapshot" && trace.events.empty() && trace.meta.segments.empty()) {
    // A snapshot taken before anything was allocated on the device (or in a process that never used it):
    // a PyTorch snapshot all right, with nothing in it.
    fmt::print(stderr,
               "fraglab: {} is an empty snapshot: device {} has no segments and no history (nothing was allocated "
               "on it when the snapshot was taken), so there is nothing to compare.\n",
               args.path, trace.meta.device);
    return 2;
  }
  if (!records_device_calls(trace)) {
    fmt::print(stderr,
               "fraglab: {} ({}) records no device calls of its allocator (no segment_alloc, segment_free, "
               "segment_map or segment_unmap events and no final segments), so there is nothing to compare a "
               "policy's calls with. fidelity needs a PyTorch snapshot; `fraglab replay` compares policies on "
               "any trace.\n",
               args.path, trace.meta.format);
    return 2;
  }
  FidelityOptions options;
  options.policy = args.policy;
  if (!args.capacity.empty()) options.capacity = parse_size(args.capacity);
  std::string note;
  options.capacity = capacity_for(trace, options.capacity, &note);
  if (!note.empty() && !args.json) fmt::print(stderr, "note: {}\n", note);
  if (!args.json)
    for (const SkippedAction& k : trace.meta.skipped_actions)
      fmt::print(stderr, "note: recorded with skip_actions, no {}: {}\n", k.action, k.reading);
  options.hint_addresses = !args.no_hints;
  FidelityResult r = check_fidelity(trace, options);
  if (args.json) {
    nlohmann::json j{{"trace", args.path},
                     {"policy", args.policy},
                     {"exact", r.exact},
                     {"replay_events", r.replay_events},
                     {"device_calls_compared", r.device_calls},
                     {"reserved_checks", r.reserved_checks},
                     {"ooms", r.ooms},
                     {"recorded_peak_reserved", r.recorded_peak},
                     {"simulated_peak_reserved", r.simulated_peak}};
    if (options.capacity) j["capacity"] = *options.capacity;
    if (!note.empty()) j["capacity_inferred"] = note;
    for (const SkippedAction& k : trace.meta.skipped_actions)
      j["skipped_actions"].push_back({{"action", k.action}, {"reading", k.reading}});
    if (!r.exact) j["divergence"] = {{"event_index", r.event_index}, {"what", r.what}, {"context", r.context}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
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
  cmd->add_option("trace", args->path,
                  "recorded trace with the allocator's device calls (a PyTorch snapshot, or a "
                  "trace converted from one); formats: " +
                      format_list())
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
