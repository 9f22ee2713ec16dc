// fraglab info TRACE: what a trace holds, independent of any policy.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <memory>

#include <nlohmann/json.hpp>

#include "allocators/policy_options.h"
#include "allocators/pytorch/config.h"
#include "allocators/pytorch/gpu_memory.h"
#include "cli/command_json.h"
#include "cli/commands.h"
#include "cli/device_arg.h"
#include "cli/live_output.h"
#include "cli/progress.h"
#include "cli/stdin_input.h"
#include "import/trace_import.h"
#include "report/program_attribution.h"
#include "traces/formats/pytorch/pool_inference.h"
#include "traces/formats/pytorch/pytorch_snapshot.h"
#include "traces/formats/pytorch/settings_inference.h"
#include "traces/history_check.h"
#include "traces/io/format_error.h"
#include "traces/state_json.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

namespace fraglab::cli {

namespace {
// The windows where the program ran under the other expandable_segments setting
// (traces/formats/pytorch/settings_inference.h).
void print_setting_changes(const TraceMeta& m) {
  if (m.expandable_flipped.empty()) return;
  const bool recorded = recorded_expandable(m);
  std::string spans;
  for (const auto& [first, end] : m.expandable_flipped)
    spans += fmt::format("{}#{}{}", spans.empty() ? "" : ", ", first,
                         end == UINT64_MAX ? std::string(" to the end") : fmt::format("-#{}", end - 1));
  // Without recorded settings the snapshot's setting is PyTorch's default: the calls show the one the job had.
  const char* why = m.allocator_settings.empty() || m.settings_inferred ? "the snapshot records no settings"
                                                                        : "the program's _set_allocator_settings";
  fmt::print(
      "changed      expandable_segments was {} for allocations {} ({}; read from the device calls, "
      "replayed so)\n",
      recorded ? "False" : "True", spans, why);
}

// Keys of the recorded settings text that no PyTorch the model knows accepts (a later one's): skipped.
void print_unmodelled_keys(const TraceMeta& m) {
  std::vector<std::string> unknown;
  try {
    detail::PytorchAllocatorConfig().apply_recorded(m.allocator_settings, &unknown);
  } catch (const std::exception&) {
    return;  // a value the model refuses: replay names it
  }
  if (!unknown.empty())
    fmt::print("not modelled settings {} (keys of a later PyTorch; replayed without them)\n", fmt::join(unknown, ", "));
}
}  // namespace

namespace {

std::string dist_line(const Distribution& d, bool bytes) {
  auto f = [&](double v) { return bytes ? format_size(static_cast<uint64_t>(v)) : fmt::format("{:.0f}", v); };
  return fmt::format("min {}  p50 {}  p90 {}  p99 {}  max {}", f(d.min), f(d.p50), f(d.p90), f(d.p99), f(d.max));
}

// "48 (24 ranges: ProfilerStep#0, Optimizer.step#AdamW.step, ...; 2 marks)": the program's markers.
std::string annotations_line(const TraceMeta& m) {
  uint64_t ranges = 0, marks = 0;
  std::vector<std::string> names;
  for (const Annotation& a : m.annotations) {
    ranges += a.start && !a.mark;
    marks += a.mark;
    if ((a.start || a.mark) && names.size() < 4 && std::find(names.begin(), names.end(), a.name) == names.end())
      names.push_back(a.name);
  }
  return fmt::format("{} ({} ranges, {} marks{}{})", m.annotations.size(), ranges, marks, names.empty() ? "" : ": ",
                     fmt::join(names, ", "));
}

// The trace at `path` and its statistics. A snapshot whose pools await only the allocator model's check
// (traces/formats/pytorch/pool_inference.h, rule 7: no private pool inferred) is read without it, and the check, a
// replay of the whole history, runs on another core while the statistics are computed; where it would revise the pools
// (rare), the snapshot is read again with it. The result is what reading with the check gives. The statistics come with
// the history check (what no allocator can have done), found in the same pass.
struct OpenedTrace : CheckedStats {
  std::unique_ptr<Trace> whole;  // a snapshot read whole (what `source` reads), else nullptr
  std::unique_ptr<EventSource> source;
};

// "0 (909 entries), 1 (segments only)": the GPUs a multi-GPU snapshot holds data for.
std::string gpus_line(const TraceMeta& m) {
  std::string out;
  for (const auto& [device, holds] : m.devices_with_data)
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", device, holds);
  return out;
}

bool is_snapshot(const std::string& path) {
  try {
    // Only a regular file is sniffed (a FIFO would block); open_trace words every refusal.
    return std::filesystem::is_regular_file(path) && detect_format(path) == TraceFormat::PytorchSnapshot;
  } catch (const std::exception&) {
    return false;
  }
}

OpenedTrace open_with_stats(const std::string& path, int trace_device) {
  OpenedTrace o;
  if (is_snapshot(path)) {
    ReadOptions deferred{trace_device};
    deferred.defer_pool_check = true;
    deferred.check_history_ahead = true;  // the statistics' history check finds the verdict (traces/history_check.h)
    o.whole = std::make_unique<Trace>(read_pytorch_snapshot(path, with_pytorch_model(deferred)));
    if (pool_check_pending(*o.whole)) {
      const Trace* whole = o.whole.get();
      std::future<bool> confirmed = std::async(std::launch::async, [whole] { return pools_confirmed(*whole); });
      static_cast<CheckedStats&>(o) = compute_checked_stats(*whole);
      if (confirmed.get()) {
        o.source = std::make_unique<MemorySource>(*whole);
        return o;
      }
      o.whole.reset();
    } else {
      o.source = std::make_unique<MemorySource>(*o.whole);
      static_cast<CheckedStats&>(o) = compute_checked_stats(*o.whole);
      return o;
    }
  }
  o.source = open_trace(path, {trace_device});
  static_cast<CheckedStats&>(o) = compute_checked_stats(*o.source);
  return o;
}

// The trace `--at` attributes: the one read for the statistics where a snapshot was read whole (a 2.4M-entry
// snapshot is not read twice), else read now into `holder`.
const Trace& trace_for_at(const OpenedTrace& opened, std::unique_ptr<Trace>& holder, const std::string& path,
                          int trace_device) {
  if (opened.whole) return *opened.whole;
  holder = std::make_unique<Trace>(load_trace(path, {trace_device}));
  return *holder;
}

std::string time_span(const TraceMeta& m, const TraceStats& s) {
  if (!m.has_times) return "n/a (the recording has no timestamps)";
  return fmt::format("{:.3f} s", static_cast<double>(s.time_span_us()) / 1e6);
}

// "default 80 allocations, (1, 0) 28 (private: a CUDA graph's), ..."
std::string pools_line(const TraceMeta& m, const TraceStats& s) {
  std::string out;
  for (size_t i = 0; i < m.pools.size(); ++i) {
    uint64_t n = i < s.allocs_by_pool.size() ? s.allocs_by_pool[i] : 0;
    std::string about = pool_origin(m.pools[i]);
    if (std::string traits = pool_traits(m.pools[i]); !traits.empty())
      about += (about.empty() ? "MemPool: " : "; MemPool: ") + traits;
    out += fmt::format("{}{} {} allocations{}", out.empty() ? "" : ", ", pool_name(m.pools[i]), n,
                       about.empty() ? "" : fmt::format(" ({})", about));
  }
  return out;
}

}  // namespace

void add_info(CLI::App& app, CommandFn& run) {
  auto* cmd = app.add_subcommand(
      "info", "Summarize a trace: events, streams, peak live bytes, size and lifetime distributions");
  static std::string path;
  static DeviceOptions device;
  static bool as_json = false;
  static std::string at;
  static size_t top = 8;
  dash_reads_stdin(cmd->add_option("trace", path, "Trace file: " + format_list()))->required();
  cmd->add_option("--at", at,
                  "Who holds the live memory at: oom (each recorded OOM), peak (the live peak) or an event index: "
                  "by the line of your code, category, step and phase");
  cmd->add_option("--top", top, "Rows per list with --at");
  add_device_options(cmd, device, false);
  cmd->add_flag("--json", as_json, "Print JSON");
  cmd->callback([&run] {
    run = [] {
      check_at(at);
      const int trace_device = device.resolve().trace_device;
      Progress progress("info: reading the trace");
      const OpenedTrace opened = open_with_stats(path, trace_device);
      progress.done();
      const std::unique_ptr<EventSource>& source = opened.source;
      const TraceStats& s = opened.stats;
      const TraceMeta& m = source->meta();
      const HistoryProblems& impossible = opened.history;
      // A history no allocator can have made: said first, on stderr too, whatever the output's form.
      if (impossible.count)
        fmt::print(stderr, "warning: {}: the history is impossible ({} problem{}); first, at event {}: {}\n",
                   printable(path), impossible.count, impossible.count == 1 ? "" : "s", impossible.first_event,
                   printable(impossible.first));
      const StateSummary st = summarize_state(m.initial);
      const uint64_t st_free = st.reserved - std::min(st.reserved, st.allocated);
      if (as_json) {
        nlohmann::json j = info_json(path, m, s, impossible);
        std::unique_ptr<Trace> holder;
        if (!at.empty()) j["at"] = moments_json(moments_at(trace_for_at(opened, holder, path, trace_device), at, s));
        fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
        return 0;
      }
      fmt::print("trace        {} ({})\n", path, m.format);
      if (!m.devices_with_data.empty())
        fmt::print("device       {} of the snapshot's GPUs {} (--gpu N reads another)\n", m.device, gpus_line(m));
      else if (m.device != 0)
        fmt::print("device       {} (a snapshot's history of one GPU; --gpu picks another)\n", m.device);
      fmt::print("events       {}  ({} allocations, {} frees, {} free requests, {} empty_cache)\n", s.events,
                 s.by_kind[0], s.by_kind[1], s.by_kind[3], s.by_kind[2]);
      fmt::print("recorded     {} segment allocs, {} segment frees, {} maps, {} unmaps, {} OOMs\n", s.by_kind[4],
                 s.by_kind[5], s.by_kind[6], s.by_kind[7], s.by_kind[8]);
      fmt::print("streams      {}\n", s.streams_used);
      if (m.pools.size() > 1) fmt::print("pools        {}\n", pools_line(m, s));
      fmt::print("time span    {}\n", time_span(m, s));
      if (m.history_absent) {
        if (!m.skipped_actions.empty())  // a history without allocations (skip_actions): nothing to replay
          fmt::print(
              "history      not replayable (recorded with skip_actions, below): the state is the allocator's "
              "at the end\n");
        else
          fmt::print(
              "history      none: the snapshot holds the allocator's state only (record with "
              "torch.cuda.memory._record_memory_history() for a history to replay)\n");
        fmt::print(
            "state        {} segments, {} reserved, {} allocated in {} blocks, {} free in {} blocks "
            "(largest {}, fragmentation {:.1f}%)\n",
            st.segments, format_size(st.reserved), format_size(st.allocated), st.live_blocks, format_size(st_free),
            st.free_blocks, format_size(st.largest_free),
            st_free ? 100.0 * (1.0 - static_cast<double>(st.largest_free) / static_cast<double>(st_free)) : 0.0);
      } else if (!m.initial.empty()) {
        fmt::print(
            "mid-run      the history began mid-run: before its first entry the allocator held {} segments, "
            "{} ({} bytes) reserved, {} live blocks ({} allocated), {} free\n",
            st.segments, format_size(st.reserved), st.reserved, st.live_blocks, format_size(st.allocated),
            format_size(st_free));
      }
      fmt::print("peak live    {} ({} bytes) requested, at event {}; {} blocks live at most\n",
                 format_size(s.peak_live_requested), s.peak_live_requested, s.peak_live_index, s.peak_live_count);
      if (s.recorded_peak_reserved)
        fmt::print("recorded     peak reserved {} ({} bytes) by the recording allocator\n",
                   format_size(s.recorded_peak_reserved), s.recorded_peak_reserved);
      fmt::print("never freed  {}\n", s.never_freed);
      for (const auto& [key, count] : m.unreplayed)
        fmt::print("not replayed {} {} (read; host memory and annotations are not device memory)\n", count, key);
      for (const SkippedAction& k : m.skipped_actions)
        fmt::print("skipped      {} (recorded with skip_actions): {}\n", k.action, k.reading);
      if (!m.annotations.empty()) fmt::print("annotations  {}\n", annotations_line(m));
      for (size_t k = 1; k < s.by_compile_context.size(); ++k)
        if (s.by_compile_context[k].allocations)
          fmt::print("compiled     {} allocations, {} requested, in torch.compile's \"{}\"\n",
                     s.by_compile_context[k].allocations, format_size(s.by_compile_context[k].requested_bytes),
                     m.compile_contexts[k - 1]);
      if (const HostMemory& h = m.host; h.present()) {
        fmt::print(
            "host memory  pinned (CachingHostAllocator, not replayed): {} segments, {} reserved, {} allocated "
            "at the end\n",
            h.segments, format_size(h.reserved), format_size(h.allocated));
        if (h.trace_entries)
          fmt::print(
              "host history {} entries: {} allocations, {} frees, {} segment allocs, {} segment frees; peak {} "
              "allocated, {} reserved\n",
              h.trace_entries, h.allocs, h.frees, h.segment_allocs, h.segment_frees, format_size(h.peak_allocated),
              format_size(h.peak_reserved));
      }
      if (m.dropped_unknown_frees)
        fmt::print("dropped      {} frees of blocks that lie in no segment the snapshot shows\n",
                   m.dropped_unknown_frees);
      if (m.dropped_stale_entries)
        fmt::print(
            "dropped      {} history entries older than those before them: the ring was made smaller while it "
            "recorded (_record_memory_history called again with a lower max_entries), and PyTorch kept the old "
            "ring's entries past the new size\n",
            m.dropped_stale_entries);
      fmt::print("sizes        {}\n", dist_line(s.sizes, true));
      fmt::print("lifetimes    {} events\n", dist_line(s.lifetimes_events, false));
      fmt::print("lifetimes    {} us\n", dist_line(s.lifetimes_us, false));
      if (auto conf = detail::recorded_conf(m.allocator_settings); conf && m.settings_inferred)
        fmt::print(
            "inferred     {}='{}' (the snapshot records no settings; the model follows the recording further "
            "with these than with PyTorch's defaults, and replays with them)\n",
            conf.variable, *conf.text);
      else if (conf)
        fmt::print("recorded with {}='{}'\n", conf.variable, *conf.text);
      print_unmodelled_keys(m);
      if (m.allocator_settings.contains(kNotedLargeSegmentSize))
        fmt::print(
            "inferred     large_segment_size_mb:{} (from the device calls: the recorded settings text, replaced by a "
            "later _set_allocator_settings, no longer names it)\n",
            recorded_large_segment_size(m) >> 20);
      print_setting_changes(m);
      if (m.gpu_total_memory)
        fmt::print(
            "gpu          {} ({} bytes of memory), told by replay: under expandable segments the model takes the "
            "blocks PyTorch took only with this GPU's address ranges (a snapshot does not record the GPU)\n",
            detail::known_gpu_name(m.gpu_total_memory), m.gpu_total_memory);
      std::unique_ptr<Trace> holder;
      if (!at.empty())
        for (const auto& [index, what] : moments_at(trace_for_at(opened, holder, path, trace_device), at, s)) {
          fmt::print("\nat event {}{}:\n", index, what.live_count ? "" : " (nothing live)");
          print_live_attribution(what, top, "  ");
        }
      return 0;
    };
  });
}

}  // namespace fraglab::cli
