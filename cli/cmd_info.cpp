// fraglab info TRACE: what a trace holds, independent of any policy.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "allocators/policy_options.h"
#include "cli/commands.h"
#include "cli/device_arg.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

namespace fraglab::cli {

namespace {

std::string dist_line(const Distribution& d, bool bytes) {
  auto f = [&](double v) { return bytes ? format_size(static_cast<uint64_t>(v)) : fmt::format("{:.0f}", v); };
  return fmt::format("min {}  p50 {}  p90 {}  p99 {}  max {}", f(d.min), f(d.p50), f(d.p90), f(d.p99), f(d.max));
}

nlohmann::json dist_json(const Distribution& d) {
  return {{"count", d.count}, {"min", d.min}, {"p50", d.p50}, {"p90", d.p90},
          {"p99", d.p99},     {"max", d.max}, {"mean", d.mean}};
}

}  // namespace

void add_info(CLI::App& app, CommandFn& run) {
  auto* cmd = app.add_subcommand("info", "Summarize a trace: events, streams, peak live bytes, size and lifetime distributions");
  static std::string path;
  static DeviceOptions device;
  static bool as_json = false;
  cmd->add_option("trace", path, "Trace file (.pickle[.gz], .fltrace, .jsonl)")->required();
  add_device_options(cmd, device);
  cmd->add_flag("--json", as_json, "Print JSON");
  cmd->callback([&run] {
    run = [] {
      auto source = open_trace(path, {device.resolve().trace_device});
      TraceStats s = compute_stats(*source);
      const TraceMeta& m = source->meta();
      if (as_json) {
        nlohmann::json kinds;
        for (int k = 0; k < kEventKindCount; ++k) kinds[event_kind_name(static_cast<EventKind>(k))] = s.by_kind[k];
        nlohmann::json j{{"trace", path},
                         {"format", m.format},
                         {"events", s.events},
                         {"by_kind", kinds},
                         {"allocations", s.by_kind[0]},
                         {"streams", s.streams_used},
                         {"time_span_us", s.time_span_us()},
                         {"peak_live_requested", {{"bytes", s.peak_live_requested}, {"event_index", s.peak_live_index}}},
                         {"peak_live_count", s.peak_live_count},
                         {"never_freed", s.never_freed},
                         {"dropped_unknown_frees", m.dropped_unknown_frees},
                         {"recorded_peak_reserved", s.recorded_peak_reserved},
                         {"allocator_settings", m.allocator_settings},
                         {"sizes", dist_json(s.sizes)},
                         {"lifetimes_events", dist_json(s.lifetimes_events)},
                         {"lifetimes_us", dist_json(s.lifetimes_us)}};
        fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
        return 0;
      }
      fmt::print("trace        {} ({})\n", path, m.format);
      fmt::print("events       {}  ({} allocations, {} frees, {} free requests, {} empty_cache)\n", s.events,
                 s.by_kind[0], s.by_kind[1], s.by_kind[3], s.by_kind[2]);
      fmt::print("recorded     {} segment allocs, {} segment frees, {} maps, {} unmaps, {} OOMs\n", s.by_kind[4],
                 s.by_kind[5], s.by_kind[6], s.by_kind[7], s.by_kind[8]);
      fmt::print("streams      {}\n", s.streams_used);
      fmt::print("time span    {:.3f} s\n", static_cast<double>(s.time_span_us()) / 1e6);
      fmt::print("peak live    {} ({} bytes) requested, at event {}; {} blocks live at most\n",
                 format_size(s.peak_live_requested), s.peak_live_requested, s.peak_live_index, s.peak_live_count);
      if (s.recorded_peak_reserved)
        fmt::print("recorded     peak reserved {} ({} bytes) by the recording allocator\n",
                   format_size(s.recorded_peak_reserved), s.recorded_peak_reserved);
      fmt::print("never freed  {}\n", s.never_freed);
      if (m.dropped_unknown_frees)
        fmt::print("dropped      {} frees of blocks allocated before recording began\n", m.dropped_unknown_frees);
      fmt::print("sizes        {}\n", dist_line(s.sizes, true));
      fmt::print("lifetimes    {} events\n", dist_line(s.lifetimes_events, false));
      fmt::print("lifetimes    {} us\n", dist_line(s.lifetimes_us, false));
      auto conf = m.allocator_settings.find("PYTORCH_CUDA_ALLOC_CONF");
      if (conf != m.allocator_settings.end())
        fmt::print("recorded with PYTORCH_CUDA_ALLOC_CONF='{}'\n", conf->second);
      return 0;
    };
  });
}

}  // namespace fraglab::cli
