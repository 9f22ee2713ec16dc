#include "cli/command_json.h"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

#include "allocators/policy_options.h"
#include "allocators/registry.h"
#include "cli/fit_output.h"
#include "cli/live_output.h"
#include "report/alloc_groups.h"
#include "report/policy_grid.h"
#include "sim/capacity.h"
#include "sim/result_json.h"
#include "traces/state_json.h"

namespace fraglab::cli {

SimDeviceConfig sim_config(const std::string& capacity, const std::string& addresses) {
  SimDeviceConfig config;
  if (!capacity.empty()) config.capacity = parse_size(capacity);
  config.addresses = parse_address_model(addresses).value_or(AddressModel::Auto);
  return config;
}

namespace {

nlohmann::json dist_json(const Distribution& d) {
  return {{"count", d.count}, {"min", d.min}, {"p50", d.p50},  {"p90", d.p90},
          {"p99", d.p99},     {"max", d.max}, {"mean", d.mean}};
}

}  // namespace

// --- info

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

// A multi-GPU snapshot's GPUs with what each holds (the one read is `device`); empty for one GPU's data.
nlohmann::json gpus_json(const TraceMeta& m) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [device, holds] : m.devices_with_data) out.push_back({{"device", device}, {"holds", holds}});
  return out;
}

nlohmann::json info_json(const std::string& name, const TraceMeta& m, const TraceStats& s,
                         const HistoryProblems& impossible) {
  const StateSummary st = summarize_state(m.initial);
  nlohmann::json kinds;
  for (int k = 0; k < kEventKindCount; ++k) kinds[event_kind_name(static_cast<EventKind>(k))] = s.by_kind[k];
  nlohmann::json unreplayed = nlohmann::json::object();
  for (const auto& [key, count] : m.unreplayed) unreplayed[key] = count;
  nlohmann::json pools = nlohmann::json::array();
  for (size_t i = 0; i < m.pools.size(); ++i)
    pools.push_back({{"id", m.pools[i].id},
                     {"allocations", i < s.allocs_by_pool.size() ? s.allocs_by_pool[i] : 0},
                     {"own_allocator", m.pools[i].own_allocator},
                     {"use_on_oom", m.pools[i].use_on_oom},
                     {"no_split", m.pools[i].no_split},
                     {"empties_on_release", m.pools[i].empties_on_release}});
  return {{"schema_version", kJsonSchemaVersion},
          {"command", "info"},
          {"trace", name},
          {"format", m.format},
          {"device", m.device},
          {"gpus_in_snapshot", gpus_json(m)},
          {"events", s.events},
          {"by_kind", kinds},
          {"allocations", s.by_kind[0]},
          {"streams", s.streams_used},
          {"time_span_us", m.has_times ? nlohmann::json(s.time_span_us()) : nlohmann::json(nullptr)},
          {"unreplayed", unreplayed},
          {"pools", pools},
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
          {"peak_live_requested", s.peak_live_requested},
          {"peak_live_requested_event", s.peak_live_index},
          {"peak_live_count", s.peak_live_count},
          {"never_freed", s.never_freed},
          {"dropped_unknown_frees", m.dropped_unknown_frees},
          {"dropped_stale_entries", m.dropped_stale_entries},
          {"double_frees", m.double_frees},
          // A history no allocator can have made (traces/history_check.h): null when there is none.
          {"impossible", impossible.count ? nlohmann::json{{"problems", impossible.count},
                                                           {"first_event", impossible.first_event},
                                                           {"first", impossible.first}}
                                          : nlohmann::json(nullptr)},
          {"recorded_peak_reserved", s.recorded_peak_reserved},
          {"allocator_settings", m.allocator_settings},
          // allocator_settings were inferred from the recording (the snapshot records none).
          {"settings_inferred", m.settings_inferred},
          // The GPU's memory (totalGlobalMem) where the import told it by replay (expandable segments); null else.
          {"gpu_total_memory", m.gpu_total_memory ? nlohmann::json(m.gpu_total_memory) : nlohmann::json(nullptr)},
          // Alloc ordinals [first, end) run under the other expandable_segments setting (end 2^64-1: to the end).
          {"expandable_flipped", ranges_to_json(m.expandable_flipped)},
          {"sizes", dist_json(s.sizes)},
          {"lifetimes_events", dist_json(s.lifetimes_events)},
          {"lifetimes_us", dist_json(s.lifetimes_us)},
          // Kinds of entries the recording skipped (_record_memory_history(skip_actions=...)), and how read.
          {"skipped_actions",
           [&] {
             nlohmann::json out = nlohmann::json::array();
             for (const SkippedAction& k : m.skipped_actions)
               out.push_back({{"action", k.action}, {"reading", k.reading}});
             return out;
           }()},
          {"annotations",
           {{"count", m.annotations.size()},
            {"marks",
             std::count_if(m.annotations.begin(), m.annotations.end(), [](const Annotation& a) { return a.mark; })}}},
          // torch.compile regions the allocations were made in (a snapshot recorded with compile_context=True).
          {"compile_contexts",
           [&] {
             nlohmann::json out = nlohmann::json::array();
             for (size_t k = 1; k < s.by_compile_context.size() && k <= m.compile_contexts.size(); ++k)
               if (s.by_compile_context[k].allocations)
                 out.push_back({{"context", m.compile_contexts[k - 1]},
                                {"allocations", s.by_compile_context[k].allocations},
                                {"requested_bytes", s.by_compile_context[k].requested_bytes}});
             return out;
           }()},
          // Pinned host memory (PyTorch 2.14's host_segments / host_traces); null when the snapshot has none.
          {"host", m.host.present() ? host_memory_to_json(m.host) : nlohmann::json(nullptr)}};
}

void check_at(const std::string& at) {
  if (!at.empty() && at != "oom" && at != "peak" && at.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("--at '" + at + "' is not oom, peak or an event index");
}

std::vector<std::pair<uint64_t, LiveAttribution>> moments_at(const Trace& t, const std::string& at,
                                                             const TraceStats& stats) {
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

nlohmann::json moments_json(const std::vector<std::pair<uint64_t, LiveAttribution>>& moments) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& moment : moments) {
    nlohmann::json one = attribution_json(moment.second);
    one["event_index"] = moment.first;
    out.push_back(one);
  }
  return out;
}

// --- replay

PreparedReplay prepare_replay(const Trace& trace, const std::string& name, const std::string& capacity,
                              const std::string& addresses, bool oracle_bound) {
  PreparedReplay p;
  p.bounds = compute_bounds(trace.events, oracle_bound);
  if (p.bounds.oracle_unsearched)
    p.notes.push_back(
        fmt::format("the oracle plan placed {} allocations without its best-fit search (too many live together for "
                    "its work bound): the oracle bound is looser (docs/limits.md)",
                    p.bounds.oracle_unsearched));
  p.config = sim_config(capacity, addresses);
  std::string note;
  p.config.capacity = capacity_for(trace, p.config.capacity, &note);
  if (!note.empty()) p.notes.push_back(note);
  for (const SkippedAction& k : trace.meta.skipped_actions)
    p.notes.push_back(fmt::format("{} was recorded with skip_actions, no {}: {}", name, k.action, k.reading));
  if (trace.meta.history_absent && trace.meta.skipped_actions.empty())
    p.notes.push_back(fmt::format(
        "{} holds no history (a snapshot of segments only): nothing to replay but its state; `fraglab info` "
        "summarises it",
        name));
  return p;
}

std::string policy_accuracy_note(const std::string& policy) {
  const PolicyInfo* info = find_policy(PolicySpec::parse(policy).name);
  return info ? info->accuracy_note : std::string();
}

nlohmann::json replay_json(const std::vector<ReplayResult>& results, const std::string& name, uint64_t bound) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : results) {
    auto j = to_json(r);
    j["trace"] = name;
    j["live_bytes_bound"] = bound;
    if (auto note = policy_accuracy_note(r.policy); !note.empty()) j["accuracy_note"] = note;
    out.push_back(j);
  }
  return {{"schema_version", kJsonSchemaVersion},
          {"command", "replay"},
          {"trace", name},
          {"live_bytes_bound", bound},
          {"results", out}};
}

// --- fidelity

namespace {
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
}  // namespace

std::optional<std::string> fidelity_refusal(const Trace& trace, const std::string& name) {
  if (trace.meta.format == "pytorch-snapshot" && trace.events.empty() && trace.meta.segments.empty())
    // A snapshot taken before anything was allocated on the device (or in a process that never used it):
    // a PyTorch snapshot all right, with nothing in it.
    return fmt::format(
        "{} is an empty snapshot: device {} has no segments and no history (nothing was allocated on it when the "
        "snapshot was taken), so there is nothing to compare.",
        name, trace.meta.device);
  if (!records_device_calls(trace))
    return fmt::format(
        "{} ({}) records no device calls of its allocator (no segment_alloc, segment_free, segment_map or "
        "segment_unmap events and no final segments), so there is nothing to compare a policy's calls with. "
        "fidelity needs a PyTorch snapshot; `fraglab replay` compares policies on any trace.",
        name, trace.meta.format);
  return std::nullopt;
}

FidelityRun run_fidelity_check(const Trace& trace, const std::string& policy, const std::string& capacity,
                               bool hint_addresses) {
  FidelityRun run;
  run.options.policy = policy;
  if (!capacity.empty()) run.options.capacity = parse_size(capacity);
  run.options.capacity = capacity_for(trace, run.options.capacity, &run.capacity_note);
  run.options.hint_addresses = hint_addresses;
  run.skipped_actions = trace.meta.skipped_actions;
  run.result = check_fidelity(trace, run.options);
  return run;
}

nlohmann::json fidelity_json(const std::string& name, const FidelityRun& run) {
  const FidelityResult& r = run.result;
  nlohmann::json j{{"schema_version", kJsonSchemaVersion},
                   {"command", "fidelity"},
                   {"trace", name},
                   {"policy", run.options.policy},
                   {"exact", r.exact},
                   {"replay_events", r.replay_events},
                   {"device_calls_compared", r.device_calls},
                   {"reserved_checks", r.reserved_checks},
                   {"ooms", r.ooms},
                   {"recorded_peak_reserved", r.recorded_peak},
                   {"simulated_peak_reserved", r.simulated_peak}};
  if (run.options.capacity) j["capacity"] = *run.options.capacity;
  if (!run.capacity_note.empty()) j["capacity_inferred"] = run.capacity_note;
  for (const SkippedAction& k : run.skipped_actions)
    j["skipped_actions"].push_back({{"action", k.action}, {"reading", k.reading}});
  if (!r.exact) j["divergence"] = {{"event_index", r.event_index}, {"what", r.what}, {"context", r.context}};
  return j;
}

// --- tune

TuneDimension parse_dimension(const std::string& text) {
  size_t sep = text.find_first_of(":=");
  if (sep == std::string::npos || sep == 0 || sep + 1 == text.size())
    throw std::invalid_argument("--space '" + text + "' is not KEY:{VALUE,...}");
  TuneDimension d{text.substr(0, sep), {}};
  for (auto& v : expand_grid(text.substr(sep + 1))) d.values.push_back(v == "unset" ? "" : v);
  return d;
}

namespace {
nlohmann::json candidate_json(const TuneCandidate& c) {
  return {{"conf", c.conf},
          {"stage", c.stage},
          {"peak_reserved", c.peak_reserved},
          {"peak_allocated", c.peak_allocated},
          {"device_calls", c.device_calls},
          {"ooms", c.ooms},
          {"recorded_ooms", c.recorded_ooms},
          {"recorded_ooms_served", c.recorded_ooms_served},
          {"replay_seconds", c.seconds}};
}
}  // namespace

nlohmann::json tune_json(const TuneReport& r) {
  nlohmann::json ranking = nlohmann::json::array();
  for (const auto& c : r.ranking) ranking.push_back(candidate_json(c));
  return {
      {"schema_version", kJsonSchemaVersion},
      {"command", "tune"},
      {"trace", r.trace},
      {"policy", r.policy},
      {"events", r.events},
      {"live_bytes_bound", r.live_bytes_bound},
      {"recorded_peak_reserved", r.recorded_peak_reserved},
      {"recorded_conf", r.recorded_conf},
      {"recorded_conf_inferred", r.recorded_conf_inferred},
      {"capacity", r.capacity ? nlohmann::json(*r.capacity) : nlohmann::json(nullptr)},
      {"capacity_inferred", r.capacity_note.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.capacity_note)},
      {"oom_live_excess", r.oom_live_excess},
      {"oom_live_room", r.oom_live_room},
      {"best", candidate_json(r.best())},
      {"best_env", "PYTORCH_CUDA_ALLOC_CONF=" + r.best().conf},
      {"recorded", candidate_json(r.recorded)},
      {"saving_bytes", static_cast<int64_t>(r.recorded.peak_reserved) - static_cast<int64_t>(r.best().peak_reserved)},
      {"fits", r.fits()},
      {"settings_tried", r.ranking.size()},
      {"search_space_size", r.search_space_size},
      {"search_seconds", r.seconds},
      {"threads", r.threads},
      {"ranking", ranking},
  };
}

// --- diagnose

const char* diagnose_source_name(Diagnosis::Source s) {
  static const char* const names[] = {"recorded", "replay", "peak", "event"};
  return names[static_cast<int>(s)];
}

namespace {

const char* verdict_name(Verdict::Kind k) {
  static const char* const names[] = {"fits", "no_setting_fits", "needs_capacity", "no_oom", "not_searched"};
  return names[static_cast<int>(k)];
}

nlohmann::json shares_json(const std::vector<ByteShare>& shares) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : shares)
    out.push_back({{"key", s.key},
                   {"bytes", s.bytes},
                   {"count", s.count},
                   {"largest", s.largest},
                   {"oldest_events", s.oldest_events},
                   {"oldest_seconds", s.oldest_seconds}});
  return out;
}

nlohmann::json verdict_json(const Verdict& v) {
  return {{"kind", verdict_name(v.kind)},
          {"conf", v.conf},
          {"env", v.kind == Verdict::Kind::Fits || v.kind == Verdict::Kind::NoOom
                      ? nlohmann::json("PYTORCH_CUDA_ALLOC_CONF=" + v.conf)
                      : nlohmann::json(nullptr)},
          {"peak_reserved", v.peak_reserved},
          {"recorded_conf", v.recorded_conf},
          {"recorded_conf_inferred", v.recorded_conf_inferred},
          {"recorded_setting_peak", v.recorded_setting_peak},
          {"needed_bytes", v.needed_bytes},
          {"excess_bytes", v.excess_bytes},
          {"settings_tried", v.settings_tried},
          {"text", v.text}};
}

nlohmann::json diagnosis_json(const Diagnosis& d, const Trace& trace, const nlohmann::json& verdict) {
  const MemoryState& st = d.state;
  nlohmann::json could = nlohmann::json::array();
  for (const auto& c : d.could_serve) {
    const StateSegment& s = st.segments[c.segment];
    could.push_back({{"address", s.addr},
                     {"size", s.size},
                     {"kind", s.kind},
                     {"pool", s.pool},
                     {"stream", s.stream ? nlohmann::json(*s.stream) : nlohmann::json(nullptr)},
                     {"free_bytes", s.free_bytes},
                     {"largest_free", s.largest_free},
                     {"free_ranges", s.free_ranges.size()},
                     {"live_blocks", s.blocks.size()},
                     {"pinned_by", shares_json(c.pinned_by)}});
  }
  nlohmann::json out = {
      {"event_index", d.event_index},
      {"source", diagnose_source_name(d.source)},
      {"request_bytes", d.request_bytes},
      {"stream", d.stream},
      {"stream_label", stream_label(trace.meta, d.stream)},
      {"reserved_bytes", st.reserved},
      {"allocated_bytes", st.allocated},
      {"requested_bytes", st.requested},
      {"free_bytes", st.free_bytes},
      {"largest_free_bytes", st.largest_free},
      {"rounding_waste_bytes", d.rounding_waste},
      {"segments", st.segments.size()},
      {"live_blocks", st.blocks.size()},
      {"served_in_replay", d.served_in_replay},
      {"free_by_kind", shares_json(d.free_by_kind)},
      {"free_by_stream", shares_json(d.free_by_stream)},
      {"free_by_pool", shares_json(d.free_by_pool)},
      {"attributed_by", d.by_site ? "call_site" : "size_class"},
      {"could_serve_if_merged", could},
      {"stranded_by", shares_json(d.stranded_by)},
      {"request_site", d.request_site.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.request_site)},
      {"request_stack", frames_json(d.request_stack)},
      {"verdict", verdict}};
  out.update(attribution_json(d.live));
  return out;
}

}  // namespace

DiagnoseReport run_diagnose(const Trace& trace, const std::string& name, std::optional<uint64_t> capacity,
                            const DiagnoseOptions& options, std::string* note) {
  capacity = capacity_for(trace, capacity, note);
  return diagnose(trace, name, capacity, options);
}

nlohmann::json diagnose_json(const DiagnoseReport& r, const Trace& trace, const BatchModel* probes) {
  nlohmann::json verdict = verdict_json(r.verdict);
  if (r.verdict.fit && probes) verdict["fit"] = fit_json(*probes, *r.verdict.fit, "");
  nlohmann::json ooms = nlohmann::json::array();
  for (const auto& d : r.ooms) ooms.push_back(diagnosis_json(d, trace, verdict));
  return {{"schema_version", kJsonSchemaVersion},
          {"command", "diagnose"},
          {"trace", r.trace},
          {"policy", r.policy},
          {"capacity", r.capacity ? nlohmann::json(*r.capacity) : nlohmann::json(nullptr)},
          {"live_bytes_bound", r.live_bytes_bound},
          {"recorded_peak_reserved", r.recorded_peak_reserved},
          {"peak_reserved", r.peak_reserved},
          {"note", r.note},
          {"ooms", ooms},
          {"verdict", verdict}};
}

// --- diff

int64_t signed_delta(uint64_t a, uint64_t b) { return static_cast<int64_t>(b) - static_cast<int64_t>(a); }

namespace {

nlohmann::json fragmentation_json(const Fragmentation& f) {
  return {{"event_index", f.event_index},
          {"reserved", f.reserved},
          {"allocated", f.allocated},
          {"free_bytes", f.free_bytes},
          {"largest_free", f.largest_free},
          {"free_ranges", f.free_ranges},
          {"external_fragmentation", f.external()}};
}

nlohmann::json run_json(const RunSummary& s) {
  return {{"trace", s.trace},
          {"recorded_conf", s.recorded_conf},
          {"events", s.events},
          {"allocs", s.allocs},
          {"total_requested", s.total_requested},
          {"live_bytes_bound", s.live_bytes_bound},
          {"live_peak_event", s.live_peak_event},
          {"recorded_peak_reserved", s.recorded_peak_reserved},
          {"recorded_device_calls", s.recorded_device_calls},
          {"recorded_ooms", s.recorded_ooms},
          {"capacity", s.capacity ? nlohmann::json(*s.capacity) : nlohmann::json(nullptr)},
          {"peak_reserved", s.peak_reserved},
          {"peak_reserved_event", s.peak_reserved_event},
          {"peak_allocated", s.peak_allocated},
          {"ooms", s.ooms},
          {"fragmentation_at_peak", fragmentation_json(s.at_peak)},
          {"device_calls", to_json(s.calls)},
          {"has_stacks", s.groups.has_stacks}};
}

nlohmann::json groups_json(const std::vector<GroupDiff>& groups) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : groups)
    out.push_back(
        {{"key", g.key},
         {"a", {{"allocs", g.a.allocs}, {"bytes", g.a.bytes}, {"live_at_peak", g.a.live_at_peak}}},
         {"b", {{"allocs", g.b.allocs}, {"bytes", g.b.bytes}, {"live_at_peak", g.b.live_at_peak}}},
         {"delta",
          {{"allocs", g.delta_allocs()}, {"bytes", g.delta_bytes()}, {"live_at_peak", g.delta_live_at_peak()}}}});
  return out;
}

}  // namespace

nlohmann::json diff_json(const TraceDiff& d) {
  const RunSummary &a = d.a, &b = d.b;
  return {
      {"schema_version", kJsonSchemaVersion},
      {"command", "diff"},
      {"policy", d.policy},
      {"capacity", d.capacity ? nlohmann::json(*d.capacity) : nlohmann::json(nullptr)},
      {"a", run_json(a)},
      {"b", run_json(b)},
      {"delta",
       {{"events", signed_delta(a.events, b.events)},
        {"allocs", signed_delta(a.allocs, b.allocs)},
        {"live_bytes_bound", signed_delta(a.live_bytes_bound, b.live_bytes_bound)},
        {"recorded_peak_reserved", signed_delta(a.recorded_peak_reserved, b.recorded_peak_reserved)},
        {"recorded_device_calls", signed_delta(a.recorded_device_calls, b.recorded_device_calls)},
        {"peak_reserved", signed_delta(a.peak_reserved, b.peak_reserved)},
        {"peak_allocated", signed_delta(a.peak_allocated, b.peak_allocated)},
        {"free_at_peak", signed_delta(a.at_peak.free_bytes, b.at_peak.free_bytes)},
        {"largest_free_at_peak", signed_delta(a.at_peak.largest_free, b.at_peak.largest_free)},
        {"device_calls", signed_delta(a.calls.total(), b.calls.total())},
        {"ooms", signed_delta(a.ooms, b.ooms)}}},
      {"by_site", groups_json(d.by_site)},
      {"by_size_class", groups_json(d.by_size_class)},
      {"by_stream", groups_json(d.by_stream)},
      {"by_category", groups_json(d.by_category)},
  };
}

}  // namespace fraglab::cli
