#include "report/diagnose.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "allocators/policy_options.h"
#include "allocators/registry.h"
#include "report/alloc_groups.h"
#include "sim/replay_simulated.h"
#include "traces/trace_stats.h"

namespace fraglab {

DiagnoseAt DiagnoseAt::parse(const std::string& text) {
  if (text == "oom") return {Oom, 0};
  if (text == "peak") return {Peak, 0};
  size_t used = 0;
  uint64_t event = 0;
  try {
    event = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || text[0] == '-')
    throw std::invalid_argument("--at '" + text + "' is not oom, peak or an event index");
  return {Event, event};
}

std::vector<Probe> recorded_oom_requests(const Trace& trace) {
  std::vector<Probe> out;
  for (uint64_t i = 0; i < trace.events.size(); ++i)
    if (trace.events[i].kind == EventKind::Oom) out.push_back({i, trace.events[i].size, trace.events[i].stream});
  return out;
}

namespace {

std::vector<ByteShare> sorted(std::map<std::string, ByteShare>& shares) {
  std::vector<ByteShare> out;
  for (auto& [key, share] : shares) {
    share.key = key;
    out.push_back(share);
  }
  std::stable_sort(out.begin(), out.end(), [](const ByteShare& a, const ByteShare& b) { return a.bytes > b.bytes; });
  return out;
}

// Free bytes by a key of their segment.
template <class Key>
std::vector<ByteShare> free_by(const MemoryState& st, Key key) {
  std::map<std::string, ByteShare> shares;
  for (const StateSegment& s : st.segments) {
    if (!s.free_bytes) continue;
    ByteShare& share = shares[key(s)];
    share.bytes += s.free_bytes;
    share.count += s.free_ranges.size();
    share.largest = std::max(share.largest, s.largest_free);
  }
  return sorted(shares);
}

// Who a live block is: its call site (with stacks) or its size class.
class BlockNamer {
 public:
  BlockNamer(const Trace& trace, uint64_t now) : trace_(trace), labels_(trace.meta), now_(now) {}
  bool by_site() const { return labels_.has_stacks(); }
  std::string name(const StateBlock& b) const {
    return labels_.label(by_site() ? GroupBy::Site : GroupBy::SizeClass, trace_.events[b.alloc_index]);
  }
  // Adds `bytes` pinned by block b to its group.
  void add(std::map<std::string, ByteShare>& shares, const StateBlock& b, uint64_t bytes) const {
    ByteShare& s = shares[name(b)];
    s.bytes += bytes;
    ++s.count;
    s.largest = std::max(s.largest, b.size);
    uint64_t age = now_ > b.alloc_index ? now_ - b.alloc_index : 0;
    if (age > s.oldest_events) {
      s.oldest_events = age;
      int64_t now_us = trace_.events[std::min<uint64_t>(now_, trace_.events.size() - 1)].time_us;
      s.oldest_seconds = static_cast<double>(now_us - trace_.events[b.alloc_index].time_us) / 1e6;
    }
  }

 private:
  const Trace& trace_;
  GroupLabels labels_;
  uint64_t now_;
};

std::vector<ByteShare> stranded(const MemoryState& st, const BlockNamer& namer) {
  std::map<std::string, ByteShare> shares;
  for (const StateSegment& s : st.segments) {
    if (!s.free_bytes) continue;
    if (s.blocks.empty()) {  // nothing pins it: the allocator could give it back
      ByteShare& share = shares["(wholly free segment: cached, releasable)"];
      share.bytes += s.free_bytes;
      ++share.count;
      continue;
    }
    // Each live block keeps the segment, and so its free bytes, from being released: share
    // them out in proportion to the blocks' sizes (the last byte is the last block's).
    uint64_t given = 0;
    for (size_t k = 0; k < s.blocks.size(); ++k) {
      const StateBlock& b = st.blocks[s.blocks[k]];
      uint64_t part = k + 1 == s.blocks.size() ? s.free_bytes - given
                                               : static_cast<uint64_t>(static_cast<long double>(s.free_bytes) *
                                                                       static_cast<long double>(b.size) /
                                                                       static_cast<long double>(s.allocated));
      given += part;
      namer.add(shares, b, part);
    }
  }
  return sorted(shares);
}

std::vector<PinnedSegment> could_serve(const MemoryState& st, const BlockNamer& namer, uint64_t request,
                                       StreamIndex stream, size_t top) {
  std::vector<uint32_t> found;
  for (uint32_t i = 0; i < st.segments.size(); ++i) {
    const StateSegment& s = st.segments[i];
    if (request && s.free_bytes >= request && s.largest_free < request && !s.blocks.empty()) found.push_back(i);
  }
  // The request's own stream first (a caching allocator serves a stream from its own blocks).
  std::stable_sort(found.begin(), found.end(), [&](uint32_t a, uint32_t b) {
    const StateSegment &x = st.segments[a], &y = st.segments[b];
    return std::pair(x.stream != stream, -static_cast<int64_t>(x.free_bytes)) <
           std::pair(y.stream != stream, -static_cast<int64_t>(y.free_bytes));
  });
  std::vector<PinnedSegment> out;
  for (size_t k = 0; k < found.size() && k < top; ++k) {
    std::map<std::string, ByteShare> shares;
    for (uint32_t b : st.segments[found[k]].blocks) namer.add(shares, st.blocks[b], st.blocks[b].size);
    out.push_back({found[k], sorted(shares)});
  }
  return out;
}

// Live requested bytes of the trace just before each of `indices` (sorted), failed ones included.
std::vector<uint64_t> trace_live_before(const Trace& trace, const std::vector<uint64_t>& indices) {
  std::vector<uint64_t> out;
  std::vector<uint64_t> size_of;
  uint64_t live = 0;
  size_t k = 0;
  for (uint64_t i = 0; i <= trace.events.size() && k < indices.size(); ++i) {
    while (k < indices.size() && indices[k] == i) out.push_back(live), ++k;
    if (i == trace.events.size()) break;
    const Event& e = trace.events[i];
    if (e.kind == EventKind::Alloc) {
      if (e.id >= size_of.size()) size_of.resize(e.id + 1);
      size_of[e.id] = e.size;
      live += e.size;
    } else if (e.kind == EventKind::Free && e.id < size_of.size()) {
      live -= std::exchange(size_of[e.id], 0);
    }
  }
  while (out.size() < indices.size()) out.push_back(live);
  return out;
}

std::string conf_text(const std::string& conf) { return conf.empty() ? "(every default)" : conf; }

Verdict verdict_without_oom(const Trace& trace, const std::string& name, std::optional<uint64_t> capacity,
                            const DiagnoseOptions& o) {
  TuneOptions t;
  t.capacity = capacity;
  t.jobs = o.jobs;
  TuneReport r = tune(trace, name, t);
  Verdict v;
  v.kind = Verdict::Kind::NoOom;
  v.conf = r.best().conf;
  v.peak_reserved = r.best().peak_reserved;
  v.recorded_conf = r.recorded_conf;
  v.recorded_conf_inferred = r.recorded_conf_inferred;
  v.recorded_setting_peak = r.recorded.peak_reserved;
  v.settings_tried = r.ranking.size();
  double saving =
      r.recorded.peak_reserved
          ? 100.0 * (1.0 - static_cast<double>(v.peak_reserved) / static_cast<double>(r.recorded.peak_reserved))
          : 0.0;
  v.text = fmt::format(
      "no OOM to explain. The lowest predicted peak reserved of {} settings tried is {} with "
      "PYTORCH_CUDA_ALLOC_CONF=\"{}\", {:.1f}% below the recorded setting's {} ({}: {}).",
      v.settings_tried, format_size(v.peak_reserved), v.conf, saving, format_size(v.recorded_setting_peak),
      v.recorded_conf_inferred ? "inferred, the snapshot records none" : "recorded",
      v.recorded_conf.empty() ? "every default" : v.recorded_conf);
  return v;
}

Verdict verdict_for_ooms(const Trace& trace, const std::string& name, uint64_t capacity, const DiagnoseReport& rep,
                         const std::vector<Probe>& probes, const DiagnoseOptions& o) {
  Verdict v;
  // What the program needed at each OOM: its live bytes then plus the request; and its own peak.
  std::vector<uint64_t> at;
  for (const auto& d : rep.ooms) at.push_back(d.event_index);
  std::vector<uint64_t> live = trace_live_before(trace, at);
  v.needed_bytes = rep.live_bytes_bound;
  for (size_t k = 0; k < rep.ooms.size(); ++k)
    v.needed_bytes = std::max(v.needed_bytes, live[k] + rep.ooms[k].request_bytes);
  v.excess_bytes = static_cast<int64_t>(v.needed_bytes) - static_cast<int64_t>(capacity);
  if (!o.search) {
    v.kind = Verdict::Kind::NotSearched;
    v.text = "no search (--no-search).";
    return v;
  }
  TuneOptions t;
  t.capacity = capacity;
  t.jobs = o.jobs;
  TuneReport r = tune(trace, name, t);
  v.settings_tried = r.ranking.size();
  v.recorded_conf = r.recorded_conf;
  v.recorded_conf_inferred = r.recorded_conf_inferred;
  v.recorded_setting_peak = r.recorded.peak_reserved;
  const TuneCandidate& best = r.best();
  if (!best.fails()) {
    v.kind = Verdict::Kind::Fits;
    v.conf = best.conf;
    v.peak_reserved = best.peak_reserved;
    v.text = fmt::format(
        "PYTORCH_CUDA_ALLOC_CONF=\"{}\" would have served every allocation{} within the capacity of "
        "{}: predicted peak reserved {} (the cheapest of {} settings tried; the recorded setting{}, {}, "
        "{}).",
        v.conf, probes.empty() ? "" : fmt::format(" and the {} failed request(s)", probes.size()),
        format_size(capacity), format_size(v.peak_reserved), v.settings_tried,
        v.recorded_conf_inferred ? " (inferred: the snapshot records none)" : "", conf_text(v.recorded_conf),
        r.recorded.fails() ? fmt::format("fails {} in the replay", r.recorded.ooms + r.recorded.recorded_ooms_failed())
                           : std::string("fits in the replay: the model disagrees with the recording"));
    return v;
  }
  v.kind = Verdict::Kind::NoSettingFits;
  // Who holds the live bytes at the worst OOM: the answer is the program's, not the allocator's.
  const Diagnosis* worst = &rep.ooms.front();
  for (size_t k = 0; k < rep.ooms.size(); ++k)
    if (live[k] + rep.ooms[k].request_bytes >= worst->live.live_bytes + worst->request_bytes) worst = &rep.ooms[k];
  std::string holders;
  for (size_t k = 0; k < worst->live.by_site.size() && k < 2; ++k)
    holders += fmt::format("{}{} holds {}", k ? ", " : "", worst->live.by_site[k].key,
                           format_size(worst->live.by_site[k].bytes));
  std::string categories;
  for (size_t k = 0; k < worst->live.by_category.size() && k < 3; ++k)
    categories += fmt::format("{}{} {}", k ? ", " : "", worst->live.by_category[k].key,
                              format_size(worst->live.by_category[k].bytes));
  std::string who = fmt::format(" At the OOM at event {}, {} ({} by {}{}).", worst->event_index, holders, categories,
                                worst->live.by_stacks ? "call site" : "size class",
                                worst->live.by_stacks ? "" : "; categories inferred from lifetimes alone");
  if (v.excess_bytes > 0) {
    v.text = fmt::format(
        "no setting fits: the program's live bytes exceed the capacity by {} ({} needed, {} available; {} settings "
        "tried).{}",
        format_size(static_cast<uint64_t>(v.excess_bytes)), format_size(v.needed_bytes), format_size(capacity),
        v.settings_tried, who);
  } else {
    uint64_t free_at_oom = 0;
    for (const auto& d : rep.ooms) free_at_oom = std::max(free_at_oom, d.state.free_bytes);
    v.text = fmt::format(
        "no setting of {} tried fits, although the live bytes ({}) are {} below the capacity: the rest is stranded "
        "in free ranges too small for the requests (up to {} free at an OOM); free or reuse the pinning blocks "
        "listed above.{}",
        v.settings_tried, format_size(v.needed_bytes), format_size(static_cast<uint64_t>(-v.excess_bytes)),
        format_size(free_at_oom), who);
  }
  return v;
}

}  // namespace

Diagnosis diagnose_state(SteppedReplay& replay, const PolicySpec& spec, Diagnosis::Source source, uint64_t request,
                         StreamIndex stream, size_t top) {
  Diagnosis d;
  d.source = source;
  d.event_index = replay.position();
  d.request_bytes = request;
  d.stream = stream;
  d.state = capture_state(replay, spec);
  const MemoryState& st = d.state;
  d.rounding_waste = st.allocated - st.requested;
  const TraceMeta& meta = replay.trace().meta;
  d.free_by_kind = free_by(st, [](const StateSegment& s) { return s.kind; });
  d.free_by_stream = free_by(st, [&](const StateSegment& s) {
    return s.stream ? stream_label(meta, *s.stream) : std::string("(unknown stream)");
  });
  if (spec.name == "pytorch") d.free_by_pool = free_by(st, [](const StateSegment& s) { return s.pool; });
  BlockNamer namer(replay.trace(), d.event_index);
  d.by_site = namer.by_site();
  d.stranded_by = stranded(st, namer);
  d.could_serve = could_serve(st, namer, request, stream, top);
  // A recorded OOM is tried against the policy (a failed try runs its recovery, as the
  // recording allocator did); a replayed one is known to fail, and the engine tries it next.
  // Offline planners place only the trace's own allocations: they are not asked.
  const PolicyInfo* info = find_policy(spec.name);
  bool askable = info && !info->needs_whole_trace;
  if (askable && (source == Diagnosis::Source::Recorded || (source == Diagnosis::Source::Event && request)))
    d.served_in_replay = replay.probe({d.event_index, request, stream});
  return d;
}

DiagnoseReport diagnose(const Trace& trace, const std::string& name, std::optional<uint64_t> capacity,
                        const DiagnoseOptions& o) {
  DiagnoseReport rep;
  rep.trace = name;
  rep.policy = o.policy;
  rep.capacity = capacity;
  PolicySpec spec = PolicySpec::parse(o.policy);
  MemorySource stats_source(trace);
  TraceStats stats = compute_stats(stats_source);
  rep.live_bytes_bound = stats.peak_live_requested;
  rep.recorded_peak_reserved = stats.recorded_peak_reserved;

  // The whole replay first: its peak, and the OOMs the capacity causes.
  ReplayOptions plain;
  plain.on_oom = OnOom::Skip;
  plain.oracle_bound = false;
  MemorySource source(trace);
  SimDeviceConfig device{capacity};
  device.addresses = AddressModel::Auto;  // as `fraglab replay`: the recording's addresses for its own allocator
  ReplayResult whole = replay_simulated(source, spec, device, plain, &trace.events);
  rep.peak_reserved = whole.reserved.bytes;

  struct Moment {
    uint64_t index, request;
    StreamIndex stream;
    Diagnosis::Source source;
  };
  std::vector<Moment> moments;
  std::vector<Probe> recorded = recorded_oom_requests(trace);
  constexpr size_t kMaxReplayOoms = 16;
  if (o.at.kind == DiagnoseAt::Oom) {
    for (const Probe& p : recorded) moments.push_back({p.event_index, p.size, p.stream, Diagnosis::Source::Recorded});
    // Allocations the recording served and the replay fails: the model disagrees (the recorded OOMs
    // themselves, failing again, are not counted).
    std::vector<const OomRecord*> served;
    for (const OomRecord& r : whole.ooms)
      if (!r.recorded) served.push_back(&r);
    if (!recorded.empty() && !served.empty())
      rep.note = fmt::format(
          "the replay under the capacity also fails {} allocation(s) the recording served (the "
          "first at event {}).",
          served.size(), served.front()->event_index);
    if (moments.empty())
      for (const OomRecord& r : whole.ooms) {
        if (moments.size() == kMaxReplayOoms) {
          rep.note = fmt::format("the replay ran out of memory {} times; the first {} are diagnosed.",
                                 whole.ooms.size(), kMaxReplayOoms);
          break;
        }
        moments.push_back({r.event_index, r.size, r.stream, Diagnosis::Source::Replay});
      }
    if (moments.empty())
      rep.note = capacity ? "no OOM recorded, and none in the replay under the capacity: looking at the reserved peak."
                          : "no OOM recorded (and no --capacity to replay under): looking at the reserved peak.";
  }
  if (o.at.kind == DiagnoseAt::Event) {
    if (o.at.event >= trace.events.size())
      throw std::invalid_argument(fmt::format("--at {}: the trace has {} events", o.at.event, trace.events.size()));
    const Event& e = trace.events[o.at.event];
    bool asks = e.kind == EventKind::Alloc || e.kind == EventKind::Oom;
    moments.push_back({o.at.event, asks ? e.size : 0, e.stream, Diagnosis::Source::Event});
  }
  if (moments.empty() && trace.meta.history_absent) {
    // A snapshot without history is its state, whole at the last event (the trace places one live block an
    // event); its reserved bytes are there from the first, where the reserved peak would show one block.
    moments.push_back({trace.events.size(), 0, 0, Diagnosis::Source::Peak});
    rep.note = "a snapshot without history: looking at its state.";
  }
  if (moments.empty())  // the peak: the state right after the event that set it
    moments.push_back(
        {std::min<uint64_t>(whole.reserved.event_index + 1, trace.events.size()), 0, 0, Diagnosis::Source::Peak});

  SteppedReplay replay(trace, spec, capacity);
  ProgramAttribution program(trace);
  for (const Moment& m : moments) {
    replay.advance_to(m.index);
    Diagnosis d = diagnose_state(replay, spec, m.source, m.request, m.stream, o.top);
    d.live = program.live_before(m.index);
    if (m.request && m.index < trace.events.size()) {
      const Event& e = trace.events[m.index];
      d.request_site = program.site_of(e);
      d.request_stack = program.stack_of(e);
    }
    rep.ooms.push_back(std::move(d));
  }

  bool any_oom = std::any_of(rep.ooms.begin(), rep.ooms.end(), [](const Diagnosis& d) {
    return d.source == Diagnosis::Source::Recorded || d.source == Diagnosis::Source::Replay;
  });
  bool tunable = spec.name == "pytorch";
  if (!tunable) {
    rep.verdict.text = "the verdict searches PYTORCH_CUDA_ALLOC_CONF: only for --policy pytorch.";
  } else if (!any_oom) {
    if (o.search)
      rep.verdict = verdict_without_oom(trace, name, capacity, o);
    else
      rep.verdict.text = "no search (--no-search).";
  } else if (!capacity) {
    rep.verdict.kind = Verdict::Kind::NeedsCapacity;
    rep.verdict.text =
        "the device's capacity is not known: give --capacity (set_per_process_memory_fraction x the "
        "device's memory, or the memory the job could use) to search for a setting that fits.";
  } else {
    rep.verdict = verdict_for_ooms(trace, name, *capacity, rep, recorded, o);
  }
  if (o.probes && capacity) {
    FitOptions f;
    f.capacity = *capacity;
    f.jobs = o.jobs;
    f.search_best = o.search;
    rep.verdict.fit = fit_batch(*o.probes, f);
    const SettingAnswer& first = rep.verdict.fit->answers.front();
    const SettingAnswer* most = &first;
    for (const auto& a : rep.verdict.fit->answers)
      if (a.largest_batch > most->largest_batch) most = &a;
    std::string best = most == &first
                           ? std::string()
                           : fmt::format(" ({} with PYTORCH_CUDA_ALLOC_CONF=\"{}\")", most->largest_batch, most->conf);
    rep.verdict.text += fmt::format(
        " From the probes ({}), the largest batch that fits {} is {} under the recorded setting{}; confidence {}.",
        fmt::format("batches {}",
                    [&] {
                      std::string b;
                      for (const auto& p : o.probes->probes()) b += (b.empty() ? "" : ", ") + std::to_string(p.batch);
                      return b;
                    }()),
        format_size(*capacity), first.largest_batch, best, rep.verdict.fit->confidence);
  } else if (o.probes) {
    rep.verdict.text += " (The probes need the device's capacity: give --capacity.)";
  } else if (rep.verdict.kind == Verdict::Kind::NoSettingFits) {
    rep.verdict.text +=
        " For the largest batch that fits, record the program at two smaller batches and give them with --probe "
        "PATH@BATCH (fraglab fit, docs/diagnose.md).";
  }
  return rep;
}

}  // namespace fraglab
