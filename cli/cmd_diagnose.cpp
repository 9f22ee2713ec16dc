// fraglab diagnose TRACE [--capacity C] [--at oom|peak|EVENT] [--json] [--html OUT]: why an
// allocation failed (or, at the peak, where the stranded bytes are), what pins the free
// memory, and the allocator setting that would have served it (report/diagnose.h).
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "allocators/policy_options.h"
#include "cli/command_json.h"
#include "cli/commands.h"
#include "cli/device_arg.h"
#include "cli/fit_output.h"
#include "cli/live_output.h"
#include "cli/progress.h"
#include "cli/stdin_input.h"
#include "import/trace_import.h"
#include "report/alloc_groups.h"
#include "report/diagnose.h"
#include "report/diagnose_html.h"
#include "sim/capacity.h"
#include "traces/io/atomic_file.h"
#include "traces/trace_io.h"

namespace fraglab::cli {

namespace {

struct DiagnoseArgs {
  std::string path, capacity, at = "oom", policy = "pytorch", html;
  std::vector<std::string> probes;
  DeviceOptions device;  // the snapshot's device; the diagnosis replays on the simulated device only
  unsigned jobs = 0;
  size_t top = 8;
  bool json = false, no_search = false;
};

std::string shares_line(const std::vector<ByteShare>& shares) {
  std::string out;
  for (const auto& s : shares)
    out += fmt::format("{}{} {} in {} range(s), largest {}", out.empty() ? "" : " · ", s.key, format_size(s.bytes),
                       s.count, format_size(s.largest));
  return out.empty() ? "none" : out;
}

std::string age_text(const ByteShare& s) {
  return fmt::format("oldest allocated {} events ({:.2f} s) before", s.oldest_events, s.oldest_seconds);
}

void print_live(const Diagnosis& d, size_t top) {
  if (!d.request_site.empty()) fmt::print("  the request came from {}\n", d.request_site);
  print_live_attribution(d.live, top, "  ");
}

void print_diagnosis(const Diagnosis& d, const DiagnoseReport& r, const Trace& trace, size_t top) {
  const MemoryState& st = d.state;
  if (d.source == Diagnosis::Source::Peak)
    fmt::print("\nAt the reserved peak (state after event {}):\n", d.event_index ? d.event_index - 1 : 0);
  else if (d.request_bytes)
    fmt::print("\nOOM at event {} ({}): request {} ({} bytes) on {}\n", d.event_index, diagnose_source_name(d.source),
               format_size(d.request_bytes), d.request_bytes, stream_label(trace.meta, d.stream));
  else
    fmt::print("\nAt event {}:\n", d.event_index);
  fmt::print("  reserved {}, allocated {} (requested {}; rounding waste {}), free inside reserved {}\n",
             format_size(st.reserved), format_size(st.allocated), format_size(st.requested),
             format_size(d.rounding_waste), format_size(st.free_bytes));
  if (r.capacity)
    fmt::print("  capacity {}: {} not reserved\n", format_size(*r.capacity),
               format_size(*r.capacity > st.reserved ? *r.capacity - st.reserved : 0));
  if (d.request_bytes) {
    fmt::print("  largest free range {} against the request's {}{}\n", format_size(st.largest_free),
               format_size(d.request_bytes), st.largest_free >= d.request_bytes ? " (large enough)" : "");
    if (d.source == Diagnosis::Source::Recorded || d.source == Diagnosis::Source::Event)
      fmt::print("  the replay {} the request here{}\n", d.served_in_replay ? "serves" : "cannot serve",
                 d.source == Diagnosis::Source::Recorded && !d.served_in_replay ? ", as the recording could not" : "");
  }
  fmt::print("  free by segment kind: {}\n", shares_line(d.free_by_kind));
  fmt::print("  free by stream:       {}\n", shares_line(d.free_by_stream));
  if (!d.free_by_pool.empty()) fmt::print("  free by pool:         {}\n", shares_line(d.free_by_pool));
  const char* by = d.by_site ? "call site" : "size class (no stacks recorded)";
  if (d.request_bytes) {
    if (d.could_serve.empty())
      fmt::print("  no segment holds {} free: merging within a segment would not have served it\n",
                 format_size(d.request_bytes));
    else
      fmt::print(
          "  segments whose free bytes would serve the request if they were one range (pinned by their live "
          "blocks, by {}):\n",
          by);
    for (const auto& c : d.could_serve) {
      const StateSegment& s = st.segments[c.segment];
      fmt::print("    {:#x} {} segment of {}, {}: {} free in {} ranges (largest {}), {} live blocks\n", s.addr, s.kind,
                 format_size(s.size), s.stream ? stream_label(trace.meta, *s.stream) : "unknown stream",
                 format_size(s.free_bytes), s.free_ranges.size(), format_size(s.largest_free), s.blocks.size());
      for (size_t k = 0; k < c.pinned_by.size() && k < 3; ++k)
        fmt::print("      {:>10} in {} block(s)  {}  ({})\n", format_size(c.pinned_by[k].bytes), c.pinned_by[k].count,
                   c.pinned_by[k].key, age_text(c.pinned_by[k]));
    }
  }
  print_live(d, top);
  fmt::print("  stranded free bytes by the {} of the blocks pinning their segments:\n", by);
  for (size_t k = 0; k < d.stranded_by.size() && k < top; ++k) {
    const auto& s = d.stranded_by[k];
    bool whole = s.oldest_events == 0 && s.key.rfind("(wholly", 0) == 0;  // counts segments, not blocks
    fmt::print("    {:>10}  {:>5} {}  {}{}\n", format_size(s.bytes), s.count, whole ? "segment(s)" : "block(s)  ",
               s.key, s.oldest_events ? "  (" + age_text(s) + ")" : "");
  }
  if (d.stranded_by.size() > top) fmt::print("    ({} more: --top or --json)\n", d.stranded_by.size() - top);
}

void print_text(const DiagnoseReport& r, const Trace& trace, size_t top) {
  fmt::print("trace     {}: {} events, live-bytes bound {}", r.trace, trace.events.size(),
             format_size(r.live_bytes_bound));
  if (r.recorded_peak_reserved) fmt::print(", recorded peak reserved {}", format_size(r.recorded_peak_reserved));
  fmt::print("\npolicy    {} on {}; replayed peak reserved {}\n", r.policy,
             r.capacity ? fmt::format("a device of {} ({} bytes)", format_size(*r.capacity), *r.capacity)
                        : std::string("an unlimited device"),
             format_size(r.peak_reserved));
  if (!r.note.empty()) fmt::print("note      {}\n", r.note);
  for (const auto& d : r.ooms) print_diagnosis(d, r, trace, top);
  fmt::print("\nverdict: {}\n", r.verdict.text);
}

}  // namespace

void add_diagnose(CLI::App& app, CommandFn& run) {
  static DiagnoseArgs a;
  auto* cmd = app.add_subcommand("diagnose",
                                 "Why an allocation failed (or what is stranded at the peak), who pins the "
                                 "free memory, and which PYTORCH_CUDA_ALLOC_CONF would have fit");
  dash_reads_stdin(cmd->add_option("trace", a.path, "Trace file: " + format_list()))->required();
  cmd->add_option("--capacity", a.capacity,
                  "Device capacity (set_per_process_memory_fraction x memory), e.g. 20GiB; without recorded OOMs the "
                  "replay under it finds them");
  cmd->add_option("--at", a.at,
                  "oom (default: each recorded OOM, else each the capacity causes, else the peak), "
                  "peak, or an event index");
  cmd->add_option("--policy", a.policy, "Policy replayed (default pytorch: the recorded settings)");
  cmd->add_option("-j,--jobs", a.jobs, "Threads for the verdict's search (default: every core)");
  cmd->add_option("--top", a.top, "Rows per list in the text output");
  cmd->add_flag("--no-search", a.no_search, "Skip the verdict's search over allocator settings");
  cmd->add_flag("--json", a.json, "Print JSON (top-level `ooms`, one entry per moment diagnosed, and `verdict`)");
  cmd->add_option("--html", a.html, "Also write a self-contained HTML page with the block map at each OOM");
  cmd->add_option("--probe", a.probes,
                  "A snapshot of the same program at a smaller batch, PATH@BATCH (two or more): the verdict names the "
                  "largest batch that fits (fraglab fit)");
  add_device_options(cmd, a.device);
  cmd->callback([&run] {
    run = [] {
      DiagnoseOptions o;
      for (const auto& p : a.probes) parse_probe_arg(p);  // a usage error before any loading
      refuse_output_over_input({a.path}, "--html", a.html);
      if (a.probes.size() == 1) throw std::invalid_argument("--probe needs two or more snapshots at different batches");
      o.policy = a.policy;
      o.at = DiagnoseAt::parse(a.at);
      o.jobs = a.jobs;
      o.top = a.top;
      o.search = !a.no_search;
      std::optional<uint64_t> capacity;
      if (!a.capacity.empty()) capacity = sim_config(a.capacity).capacity;
      Progress progress("diagnose: reading the trace");
      Trace trace = load_trace(a.path, {a.device.simulated_trace_device("diagnose replays on the simulated device")});
      std::string note;
      std::optional<BatchModel> probes;
      if (!a.probes.empty()) {
        probes.emplace(
            load_batch_model(a.probes, a.device.simulated_trace_device("diagnose replays on the simulated device")));
        o.probes = &*probes;
      }
      progress.stage(o.search ? "diagnose: replaying the trace and allocator settings"
                              : "diagnose: replaying the trace");
      DiagnoseReport r = run_diagnose(trace, a.path, capacity, o, &note);
      progress.done();
      if (!note.empty() && !a.json) fmt::print("note      {}\n", note);
      if (!a.html.empty()) {
        AtomicFile out(a.html);
        out.write(diagnose_html(r, trace, "fraglab diagnose " + a.path));
        out.commit();
      }
      if (a.json)
        fmt::print("{}", diagnose_json(r, trace, o.probes).dump(2) + "\n");
      else
        print_text(r, trace, a.top);
      if (!a.json && r.verdict.fit) {
        fmt::print("\n== the batch what-if (fraglab fit)\n");
        print_fit(*o.probes, *r.verdict.fit, "");
      }
      // As tune: 1 when no setting fits the capacity (the exit-code table, README.md).
      return r.verdict.kind == Verdict::Kind::NoSettingFits ? 1 : 0;
    };
  });
}

}  // namespace fraglab::cli
