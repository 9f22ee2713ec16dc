#include "report/trace_diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>

#include "allocators/pytorch/config.h"
#include "allocators/registry.h"
#include "import/trace_import.h"
#include "sim/capacity.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

namespace fraglab {

namespace {

uint64_t magnitude(int64_t v) { return static_cast<uint64_t>(v < 0 ? -v : v); }

}  // namespace

RunSummary summarize_run(const Trace& trace, const std::string& path, const DiffOptions& o) {
  RunSummary s;
  s.trace = path;
  // The recorded text under any of its variables' names (PYTORCH_ALLOC_CONF, the new one, too).
  if (auto conf = detail::recorded_conf(trace.meta.allocator_settings)) s.recorded_conf = *conf.text;
  MemorySource stats_source(trace);
  TraceStats stats = compute_stats(stats_source);
  s.events = stats.events;
  s.allocs = stats.by_kind[static_cast<size_t>(EventKind::Alloc)];
  s.total_requested = stats.total_requested;
  s.live_bytes_bound = stats.peak_live_requested;
  s.live_peak_event = stats.peak_live_index;
  s.recorded_peak_reserved = stats.recorded_peak_reserved;
  for (EventKind k : {EventKind::SegmentAlloc, EventKind::SegmentFree, EventKind::SegmentMap, EventKind::SegmentUnmap})
    s.recorded_device_calls += stats.by_kind[static_cast<size_t>(k)];
  s.recorded_ooms = stats.by_kind[static_cast<size_t>(EventKind::Oom)];

  ReplayOptions options;
  options.on_oom = OnOom::Skip;
  options.oracle_bound = false;  // the diff shows no oracle bound: skip its planning
  SimDeviceConfig config;
  config.capacity = capacity_for(trace, o.capacity);  // the limit its OOMs show where none is given
  s.capacity = config.capacity;
  config.addresses = AddressModel::Auto;  // as `fraglab replay`: each run's own addresses for its own allocator
  MemorySource source(trace);
  ReplayResult r = replay_simulated(source, PolicySpec::parse(o.policy), config, options, &trace.events);
  s.peak_reserved = r.reserved.bytes;
  s.peak_reserved_event = r.reserved.event_index;
  s.peak_allocated = r.allocated.bytes;
  s.ooms = r.ooms.size();
  s.at_peak = r.at_peak;
  s.calls = r.calls;
  s.groups = break_down(trace, stats.peak_live_index);
  return s;
}

std::vector<GroupDiff> match_groups(const std::vector<AllocGroup>& a, const std::vector<AllocGroup>& b) {
  std::map<std::string, GroupDiff> by_key;
  for (const auto& g : a) by_key[g.key].a = g;
  for (const auto& g : b) by_key[g.key].b = g;
  std::vector<GroupDiff> out;
  for (auto& [key, d] : by_key) {
    d.key = key;
    d.a.key = d.b.key = key;
    out.push_back(d);
  }
  // What changes the memory a run needs first: bytes live at the peak, then traffic; among
  // equal differences, the groups that matter most.
  auto order = [](const GroupDiff& d) {
    return std::tuple(magnitude(d.delta_live_at_peak()), magnitude(d.delta_bytes()), magnitude(d.delta_allocs()),
                      std::max(d.a.live_at_peak, d.b.live_at_peak), std::max(d.a.bytes, d.b.bytes));
  };
  std::stable_sort(out.begin(), out.end(), [&](const GroupDiff& x, const GroupDiff& y) { return order(x) > order(y); });
  return out;
}

TraceDiff diff_traces(const std::string& a, const std::string& b, const DiffOptions& options) {
  TraceDiff d;
  d.policy = options.policy;
  d.capacity = options.capacity;
  PolicySpec::parse(options.policy);  // a malformed policy fails before any loading
  // A DDP/FSDP rank's snapshot holds its own GPU only: read as the CLI reads one (kAnyDevice).
  d.a = summarize_run(load_trace(a, {kAnyDevice}), a, options);
  d.b = summarize_run(load_trace(b, {kAnyDevice}), b, options);
  match_diff_groups(d);
  return d;
}

TraceDiff diff_traces(const Trace& a, const std::string& name_a, const Trace& b, const std::string& name_b,
                      const DiffOptions& options) {
  TraceDiff d;
  d.policy = options.policy;
  d.capacity = options.capacity;
  d.a = summarize_run(a, name_a, options);
  d.b = summarize_run(b, name_b, options);
  match_diff_groups(d);
  return d;
}

void match_diff_groups(TraceDiff& d) {
  d.by_site = match_groups(d.a.groups.by_site, d.b.groups.by_site);
  d.by_size_class = match_groups(d.a.groups.by_size_class, d.b.groups.by_size_class);
  d.by_stream = match_groups(d.a.groups.by_stream, d.b.groups.by_stream);
  d.by_category = match_groups(d.a.groups.by_category, d.b.groups.by_category);
}

}  // namespace fraglab
