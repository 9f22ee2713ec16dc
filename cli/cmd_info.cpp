// fraglab info TRACE: what a trace holds, independent of any policy.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "allocators/detail/pytorch_config.h"
#include "allocators/policy_options.h"
#include "cli/commands.h"
#include "cli/device_arg.h"
#include "cli/live_output.h"
#include "report/program_attribution.h"
#include "traces/format_error.h"
#include "traces/history_check.h"
#include "traces/settings_inference.h"
#include "traces/state_json.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

namespace fraglab::cli {

namespace {
// The windows where the program ran under the other expandable_segments setting (traces/settings_inference.h).
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

// The allocator's state before the first entry (a mid-run history) or the whole of a snapshot
// without history: reserved, allocated, and how its free space is cut up.
struct StateSummary {
  uint64_t segments = 0, reserved = 0, allocated = 0, live_blocks = 0, free_blocks = 0, largest_free = 0;
};

StateSummary summarize_state(const InitialState& st) {
  StateSummary out;
  for (const RecordedSegment& seg : st.segments) {
    ++out.segments;
    out.reserved += seg.total_size;
    Addr cursor = seg.address;
    auto gap = [&](Addr to) {
      if (to <= cursor) return;
      ++out.free_blocks;
      out.largest_free = std::max(out.largest_free, to - cursor);
    };
    for (const RecordedBlock& b : seg.blocks) {
      gap(b.address);
      uint64_t size = b.size ? b.size : b.requested_size;
      out.allocated += size;
      ++out.live_blocks;
      cursor = std::max(cursor, b.address + size);
    }
    gap(seg.address + seg.total_size);
  }
  return out;
}

std::string time_span(const TraceMeta& m, const TraceStats& s) {
  if (!m.has_times) return "n/a (the recording has no timestamps)";
  return fmt::format("{:.3f} s", static_cast<double>(s.time_span_us()) / 1e6);
}

nlohmann::json dist_json(const Distribution& d) {
  return {{"count", d.count}, {"min", d.min}, {"p50", d.p50},  {"p90", d.p90},
          {"p99", d.p99},     {"max", d.max}, {"mean", d.mean}};
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

// The moments `--at` names (oom: each recorded OOM, else the live peak; peak; an event index), each with who
// holds the live memory just before it. Loads the trace whole (the attribution reads every event).
std::vector<std::pair<uint64_t, LiveAttribution>> moments_at(const std::string& path, const std::string& at,
                                                             const TraceStats& stats, int trace_device) {
  Trace t = load_trace(path, {trace_device});
  std::vector<uint64_t> indices;
  if (at == "oom") {
    for (uint64_t i = 0; i < t.events.size(); ++i)
      if (t.events[i].kind == EventKind::Oom) indices.push_back(i);
  } else if (at != "peak") {
    size_t used = 0;
    uint64_t n = 0;
    try {
      n = std::stoull(at, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != at.size() || at[0] == '-')
      throw std::invalid_argument("--at '" + at + "' is not oom, peak or an event index");
    if (n > t.events.size())
      throw std::invalid_argument(fmt::format("--at {}: the trace has {} events", n, t.events.size()));
    indices.push_back(n);
  }
  if (indices.empty()) indices.push_back(std::min<uint64_t>(stats.peak_live_index + 1, t.events.size()));
  ProgramAttribution program(t);
  std::vector<std::pair<uint64_t, LiveAttribution>> out;
  for (uint64_t i : indices) out.emplace_back(i, program.live_before(i));
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
  cmd->add_option("trace", path, "Trace file: " + format_list())->required();
  cmd->add_option("--at", at,
                  "Who holds the live memory at: oom (each recorded OOM), peak (the live peak) or an event index: "
                  "by the line of your code, category, step and phase");
  cmd->add_option("--top", top, "Rows per list with --at");
  add_device_options(cmd, device);
  cmd->add_flag("--json", as_json, "Print JSON");
  cmd->callback([&run] {
    run = [] {
      if (!at.empty() && at != "oom" && at != "peak" && at.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument("--at '" + at + "' is not oom, peak or an event index");
      auto source = open_trace(path, {device.resolve().trace_device});
      HistoryChecker history(source->meta());
      TraceStats s =
          compute_stats(*source, [&](const Event* e, size_t n, uint64_t first) { history.add(e, n, first); });
      const TraceMeta& m = source->meta();
      const HistoryProblems& impossible = history.result();
      // A history no allocator can have made: said first, on stderr too, whatever the output's form.
      if (impossible.count)
        fmt::print(stderr, "warning: {}: the history is impossible ({} problem{}); first, at event {}: {}\n",
                   printable(path), impossible.count, impossible.count == 1 ? "" : "s", impossible.first_event,
                   printable(impossible.first));
      const StateSummary st = summarize_state(m.initial);
      const uint64_t st_free = st.reserved - std::min(st.reserved, st.allocated);
      if (as_json) {
        nlohmann::json kinds;
        for (int k = 0; k < kEventKindCount; ++k) kinds[event_kind_name(static_cast<EventKind>(k))] = s.by_kind[k];
        nlohmann::json j{
            {"trace", path},
            {"format", m.format},
            {"events", s.events},
            {"by_kind", kinds},
            {"allocations", s.by_kind[0]},
            {"streams", s.streams_used},
            {"time_span_us", m.has_times ? nlohmann::json(s.time_span_us()) : nlohmann::json(nullptr)},
            {"unreplayed",
             [&] {
               nlohmann::json u = nlohmann::json::object();
               for (const auto& [key, count] : m.unreplayed) u[key] = count;
               return u;
             }()},
            {"pools",
             [&] {
               nlohmann::json pools = nlohmann::json::array();
               for (size_t i = 0; i < m.pools.size(); ++i)
                 pools.push_back({{"id", m.pools[i].id},
                                  {"allocations", i < s.allocs_by_pool.size() ? s.allocs_by_pool[i] : 0},
                                  {"own_allocator", m.pools[i].own_allocator},
                                  {"use_on_oom", m.pools[i].use_on_oom},
                                  {"no_split", m.pools[i].no_split},
                                  {"empties_on_release", m.pools[i].empties_on_release}});
               return pools;
             }()},
            {"history", m.history_absent    ? "none"
                        : m.initial.empty() ? "from start"
                                            : "mid-run"},
            {"state_at_first_entry",
             {{"segments", st.segments},
              {"reserved", st.reserved},
              {"allocated", st.allocated},
              {"live_blocks", st.live_blocks},
              {"free_blocks", st.free_blocks},
              {"largest_free", st.largest_free},
              {"unplaced_frees", m.initial.unplaced_frees},
              {"estimated_requests", m.initial.estimated_requests}}},
            {"peak_live_requested", {{"bytes", s.peak_live_requested}, {"event_index", s.peak_live_index}}},
            {"peak_live_count", s.peak_live_count},
            {"never_freed", s.never_freed},
            {"dropped_unknown_frees", m.dropped_unknown_frees},
            {"dropped_stale_entries", m.dropped_stale_entries},
            {"double_frees", m.double_frees},
            {"impossible", impossible.count ? nlohmann::json{{"problems", impossible.count},
                                                             {"first_event", impossible.first_event},
                                                             {"first", impossible.first}}
                                            : nlohmann::json(nullptr)},
            {"recorded_peak_reserved", s.recorded_peak_reserved},
            {"allocator_settings", m.allocator_settings},
            // allocator_settings were inferred from the recording (the snapshot records none).
            {"settings_inferred", m.settings_inferred},
            // Alloc ordinals [first, end) run under the other expandable_segments setting (end 2^64-1: to the end).
            {"expandable_flipped", ranges_to_json(m.expandable_flipped)},
            {"sizes", dist_json(s.sizes)},
            {"lifetimes_events", dist_json(s.lifetimes_events)},
            {"lifetimes_us", dist_json(s.lifetimes_us)}};
        if (!at.empty()) {
          nlohmann::json moments = nlohmann::json::array();
          for (const auto& [index, what] : moments_at(path, at, s, device.resolve().trace_device)) {
            nlohmann::json one = attribution_json(what);
            one["event_index"] = index;
            moments.push_back(one);
          }
          j["at"] = moments;
        }
        fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
        return 0;
      }
      fmt::print("trace        {} ({})\n", path, m.format);
      if (m.device != 0)
        fmt::print("device       {} (a snapshot's history of one GPU; --device picks another)\n", m.device);
      fmt::print("events       {}  ({} allocations, {} frees, {} free requests, {} empty_cache)\n", s.events,
                 s.by_kind[0], s.by_kind[1], s.by_kind[3], s.by_kind[2]);
      fmt::print("recorded     {} segment allocs, {} segment frees, {} maps, {} unmaps, {} OOMs\n", s.by_kind[4],
                 s.by_kind[5], s.by_kind[6], s.by_kind[7], s.by_kind[8]);
      fmt::print("streams      {}\n", s.streams_used);
      if (m.pools.size() > 1) fmt::print("pools        {}\n", pools_line(m, s));
      fmt::print("time span    {}\n", time_span(m, s));
      if (m.history_absent) {
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
      if (!at.empty())
        for (const auto& [index, what] : moments_at(path, at, s, device.resolve().trace_device)) {
          fmt::print("\nat event {}{}:\n", index, what.live_count ? "" : " (nothing live)");
          print_live_attribution(what, top, "  ");
        }
      return 0;
    };
  });
}

}  // namespace fraglab::cli
