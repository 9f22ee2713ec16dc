// fraglab replay TRACE --policy P [...]: replay a trace through one or more policies on
// the simulated device and report peaks, fragmentation, device calls and OOMs.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "allocators/registry.h"
#include "cli/cmd_replay_gpu.h"
#include "cli/command_json.h"
#include "cli/commands.h"
#include "cli/device_arg.h"
#include "cli/progress.h"
#include "cli/stdin_input.h"
#include "import/trace_import.h"
#include "report/policy_grid.h"
#include "sim/bounds.h"
#include "sim/capacity.h"
#include "sim/replay_simulated.h"
#include "sim/result_json.h"
#include "traces/io/atomic_file.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

namespace fraglab::cli {

namespace {

struct ReplayArgs {
  std::string path;
  std::vector<std::string> policies{"bestfit"};
  std::string capacity;
  std::string addresses = "auto";
  std::string pools;  // --pools: separate|merge for every policy that does not say
  std::string timeline;
  uint64_t timeline_every = 1;
  std::string on_oom = "stop";
  DeviceOptions device;
  bool touch = false;
  bool json = false;
  bool check = false;
  bool no_oracle_bound = false;
};

void print_table(const std::vector<ReplayResult>& results, uint64_t bound) {
  fmt::print("{:<44} {:>12} {:>12} {:>12} {:>8} {:>7} {:>8} {:>5} {:>9}\n", "policy", "peak reserved", "peak alloc",
             "gap to bound", "res/bound", "frag", "dev calls", "OOMs", "time");
  for (const auto& r : results) {
    int64_t gap = static_cast<int64_t>(r.reserved.bytes) - static_cast<int64_t>(bound);
    fmt::print("{:<44} {:>12} {:>12} {:>12} {:>8.3f} {:>7.3f} {:>8} {:>5} {:>8.3f}s\n", r.policy,
               format_size(r.reserved.bytes), format_size(r.allocated.bytes),
               (gap < 0 ? "-" : "") + format_size(static_cast<uint64_t>(gap < 0 ? -gap : gap)),
               bound ? static_cast<double>(r.reserved.bytes) / static_cast<double>(bound) : 0.0, r.at_peak.external(),
               r.calls.total(), r.ooms.size(), r.seconds);
  }
}

void print_one(const ReplayResult& r, uint64_t bound) {
  fmt::print("policy            {}\n", r.policy);
  fmt::print("events            {} replayed ({} allocs, {} frees, {} empty_cache)\n", r.events, r.allocs, r.frees,
             r.empty_caches);
  fmt::print("peak requested    {} ({} bytes) at event {}   <- live-bytes bound\n", format_size(r.requested.bytes),
             r.requested.bytes, r.requested.event_index);
  fmt::print("peak allocated    {} ({} bytes) at event {}   (live block bytes)\n", format_size(r.allocated.bytes),
             r.allocated.bytes, r.allocated.event_index);
  fmt::print("peak reserved     {} ({} bytes) at event {}\n", format_size(r.reserved.bytes), r.reserved.bytes,
             r.reserved.event_index);
  int64_t gap = static_cast<int64_t>(r.reserved.bytes) - static_cast<int64_t>(bound);
  int64_t gap_alloc = static_cast<int64_t>(r.reserved.bytes) - static_cast<int64_t>(r.allocated.bytes);
  fmt::print("gap               {} bytes over the live-bytes bound ({:+.2f}%), {} bytes over peak allocated\n", gap,
             bound ? 100.0 * static_cast<double>(gap) / static_cast<double>(bound) : 0.0, gap_alloc);
  const Fragmentation& f = r.at_peak;
  fmt::print("at peak reserved  free {} in {} ranges, largest {}, external fragmentation {:.3f}\n",
             format_size(f.free_bytes), f.free_ranges, format_size(f.largest_free), f.external());
  fmt::print("device calls      {} segment allocs, {} segment frees, {} maps, {} unmaps ({} failed)\n",
             r.calls.segment_allocs, r.calls.segment_frees, r.calls.maps, r.calls.unmaps, r.calls.failed);
  fmt::print("addresses         {}\n", r.addresses == AddressModel::Recorded
                                           ? "the recording's, where the replay asked for the recorded segments"
                                           : address_model_name(r.addresses));
  fmt::print("final             reserved {}, allocated {}\n", format_size(r.final_reserved),
             format_size(r.final_allocated));
  for (const auto& o : r.ooms)
    if (!o.recorded)
      fmt::print("OUT OF MEMORY     at event {}: {} requested with {} reserved, {} allocated\n", o.event_index,
                 format_size(o.size), format_size(o.reserved), format_size(o.allocated));
  if (!r.recorded_ooms.empty()) {
    fmt::print(
        "recorded OOMs     {} of {} would have been served under this policy (each tried where the recording "
        "failed it, then given back: the program went on without it)\n",
        r.recorded_ooms_served(), r.recorded_ooms.size());
    for (const auto& o : r.recorded_ooms)
      fmt::print("  event {:>8}: {} requested: {} ({} reserved, {} allocated then)\n", o.event_index,
                 format_size(o.size), o.served ? "served" : "OUT OF MEMORY, as recorded", format_size(o.reserved),
                 format_size(o.allocated));
  }
  fmt::print("replay time       {:.3f} s ({:.1f} M events/s)\n", r.seconds,
             r.seconds > 0 ? static_cast<double>(r.events) / r.seconds / 1e6 : 0.0);
}

// A native trace of more events than this is replayed as it streams from the file, never
// loaded: 16M events take ~770 MB in memory, and a 100M-event trace must replay in < 2 GiB.
// Smaller ones load as every other format does (same output, oracle bound included).
constexpr uint64_t kStreamAboveEvents = 16'000'000;

// A first pass over a streamed trace: its event count and live-bytes bound, in bounded memory.
struct StreamedPass {
  uint64_t events = 0;
  uint64_t live_bytes = 0;
};

StreamedPass first_pass(const std::string& path) {
  auto source = open_trace(path);
  std::vector<Event> buffer(1 << 16);
  LiveBytesBound live;
  StreamedPass pass;
  while (size_t n = source->read(buffer.data(), buffer.size())) {
    for (size_t i = 0; i < n; ++i) live.add(buffer[i]);
    pass.events += n;
  }
  pass.live_bytes = live.peak();
  return pass;
}

int run_replay(const ReplayArgs& a) {
  refuse_output_over_input({a.path}, "--timeline", a.timeline);
  auto specs = expand_policy_list(a.policies, {});
  if (!a.pools.empty()) specs = with_pool_mode(std::move(specs), a.pools);
  DeviceArg device = a.device.resolve();
  if (!device.exec_device.empty() && device.exec_device != "sim")
    return run_cuda_replay(
        {a.path, specs, a.capacity, a.on_oom, device.trace_device, device.exec_device, a.touch, a.json});
  bool streamed = false;
  TraceBounds bounds;
  if (reads_streaming(a.path)) {
    StreamedPass pass = first_pass(a.path);
    streamed = pass.events > kStreamAboveEvents;
    if (streamed) {
      bounds.live_bytes = pass.live_bytes;
      fmt::print(stderr,
                 "note: {} has {} events: replayed as it streams, not loaded; the oracle bound is not computed\n",
                 a.path, pass.events);
    }
  }
  Trace trace;
  SimDeviceConfig config;
  if (streamed) {
    config = sim_config(a.capacity, a.addresses);
  } else {
    trace = load_trace(a.path, {device.trace_device});
    PreparedReplay prepared = prepare_replay(trace, a.path, a.capacity, a.addresses, !a.no_oracle_bound);
    for (const auto& note : prepared.notes) fmt::print(stderr, "note: {}\n", note);
    bounds = prepared.bounds;
    config = prepared.config;
  }
  uint64_t bound = bounds.live_bytes;

  std::unique_ptr<AtomicFile> timeline;
  if (!a.timeline.empty()) {
    timeline = std::make_unique<AtomicFile>(a.timeline);
    timeline->write("policy,event_index,time_us,requested,allocated,reserved\n");
  }
  std::vector<ReplayResult> results;
  Progress progress("replay");
  for (const auto& text : specs) {
    progress.stage(fmt::format("replay: {} ({} of {})", text, results.size() + 1, specs.size()));
    PolicySpec spec = PolicySpec::parse(text);
    ReplayOptions options;
    options.on_oom = a.on_oom == "skip" ? OnOom::Skip : OnOom::Stop;
    options.check_invariants = a.check;
    options.oracle_bound = !a.no_oracle_bound;  // --no-oracle-bound: no plan anywhere, not only in the bounds
    std::string rows;
    if (timeline) {
      options.on_event = [&](const TimelinePoint& p) {
        if (p.event_index % a.timeline_every) return;
        rows +=
            fmt::format("{},{},{},{},{},{}\n", text, p.event_index, p.time_us, p.requested, p.allocated, p.reserved);
      };
    }
    if (streamed) {
      auto source = open_trace(a.path);
      results.push_back(replay_simulated(*source, spec, config, options));
    } else {
      MemorySource source(trace);
      results.push_back(replay_simulated(source, spec, config, options, &trace.events));
    }
    if (timeline) timeline->write(rows);
  }
  if (timeline) timeline->commit();
  progress.done();

  if (a.json) {
    fmt::print("{}\n",
               replay_json(results, a.path, bound).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else if (results.size() == 1) {
    print_one(results[0], bound);
  } else {
    fmt::print("trace {}: live-bytes bound {} ({} bytes)\n", a.path, format_size(bound), bound);
    print_table(results, bound);
  }
  if (!a.json)
    for (const auto& r : results)
      if (auto note = policy_accuracy_note(r.policy); !note.empty()) fmt::print("note: {}: {}\n", r.policy, note);
  for (const auto& r : results)
    if (r.stopped_on_oom) return 1;
  return 0;
}

}  // namespace

void add_replay(CLI::App& app, CommandFn& run) {
  static ReplayArgs a;
  auto* cmd = app.add_subcommand("replay", "Replay a trace through allocator policies on the simulated device");
  dash_reads_stdin(cmd->add_option("trace", a.path, "Trace file: " + format_list()))->required();
  cmd->add_option("-p,--policy", a.policies,
                  "Policy with options, e.g. bestfit:align=512 or 'pytorch:expandable_segments:True'; "
                  "repeat for several; 'all' for every registered policy")
      ->take_all();
  cmd->add_option("--capacity", a.capacity, "Device capacity, e.g. 80GiB (default unlimited)");
  add_addresses_option(cmd, a.addresses);
  add_pools_option(cmd, a.pools);
  cmd->add_option("--on-oom", a.on_oom, "On out of memory: stop (exit 1) or skip the allocation")
      ->check(CLI::IsMember({"stop", "skip"}));
  add_device_options(cmd, a.device);
  cmd->add_flag("--touch", a.touch, "With --device cuda: write every block (cudaMemsetAsync) on its stream");
  cmd->add_flag("--no-oracle-bound", a.no_oracle_bound, "Skip planning the oracle bound (gap to oracle not reported)");
  cmd->add_option("--timeline", a.timeline, "Write requested/allocated/reserved bytes per event to this CSV");
  cmd->add_option("--timeline-every", a.timeline_every, "Write every Nth event to the timeline")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", a.json, "Print JSON");
  cmd->add_flag("--check", a.check, "Check invariants after every event (no overlap, inside device memory)");
  cmd->callback([&run] { run = [] { return run_replay(a); }; });
}

}  // namespace fraglab::cli
