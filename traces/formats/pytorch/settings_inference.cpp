#include "traces/formats/pytorch/settings_inference.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

namespace fraglab {

bool recorded_expandable(const TraceMeta& m) {
  if (auto it = m.allocator_settings.find("expandable_segments"); it != m.allocator_settings.end())
    return it->second == "True" || it->second == "true" || it->second == "1";
  for (const char* key : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"})
    if (auto it = m.allocator_settings.find(key); it != m.allocator_settings.end())
      return it->second.find("expandable_segments:True") != std::string::npos;
  return false;
}

uint64_t recorded_large_segment_size(const TraceMeta& m) {
  if (auto it = m.allocator_settings.find(kNotedLargeSegmentSize); it != m.allocator_settings.end())
    if (const uint64_t bytes = std::strtoull(it->second.c_str(), nullptr, 10); bytes > (10ull << 20)) return bytes;
  constexpr std::string_view kKey = "large_segment_size_mb";
  for (const char* variable : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    auto it = m.allocator_settings.find(variable);
    if (it == m.allocator_settings.end()) continue;
    // The allocator's tokenizer drops spaces: "large_segment_size_mb : 40" reads as the key, ':' and 40.
    std::string text;
    for (char c : it->second)
      if (c != ' ') text += c;
    for (size_t at = text.find(kKey); at != std::string::npos; at = text.find(kKey, at + 1)) {
      const bool starts_key = at == 0 || text[at - 1] == ',';
      const size_t colon = at + kKey.size();
      if (!starts_key || colon >= text.size() || text[colon] != ':') continue;
      const uint64_t mb = std::strtoull(text.c_str() + colon + 1, nullptr, 10);
      if (mb > 10 && mb < (1ull << 20)) return mb << 20;  // PyTorch refuses 10 MiB and less
    }
    return 20ull << 20;
  }
  return 20ull << 20;
}

void note_large_segment_size(TraceMeta& m, const std::vector<Event>& history, const HistoryIndex* index) {
  constexpr uint64_t kMiB = 1ull << 20;
  if (m.allocator_settings.empty()) return;  // no settings recorded: before PyTorch had the setting
  std::map<uint64_t, uint64_t> votes;        // segment size -> requests it served
  // Each segment_alloc and the next request, unless another device call comes first (frees and OOMs between
  // them aside).
  for_each_other_entry(history, index, [&](size_t i) {
    const Event& segment = history[i];
    if (segment.kind != EventKind::SegmentAlloc) return;
    size_t next = i + 1;
    while (next < history.size() && !is_device_event(history[next].kind) && history[next].kind != EventKind::Alloc)
      ++next;
    if (next == history.size()) return;
    const Event& e = history[next];
    // A request above 1 MiB (the large pool) and at most 8 MiB (below 10 MiB however it is rounded).
    if (e.kind == EventKind::Alloc && segment.addr == e.addr && e.size > kMiB && e.size <= 8 * kMiB)
      ++votes[segment.size];
  });
  if (votes.size() != 1) return;  // none, or sizes that disagree (a MemPool's own allocator, say)
  const uint64_t size = votes.begin()->first;
  if (size > 10 * kMiB && size % kMiB == 0 && size != recorded_large_segment_size(m))
    m.allocator_settings[kNotedLargeSegmentSize] = std::to_string(size);
}

namespace {

// What the device calls before one request say of the setting: nothing, on (a new mapping) or off (a
// cudaMalloc for a pool that would have mapped).
enum class Shows { Nothing, On, Off };

struct Evidence {
  uint64_t alloc;  // the Alloc event's ordinal among the trace's Alloc events
  bool on;
};

// Segments the snapshot still holds in a private pool: before the pools are inferred, a cudaMalloc
// there may be a MemPool's own allocator, which says nothing of the setting.
std::unordered_set<Addr> private_segments(const TraceMeta& m) {
  std::unordered_set<Addr> out;
  for (const RecordedSegment& s : m.segments)
    if (!s.is_expandable && s.pool_id != std::array<int64_t, 2>{0, 0}) out.insert(s.address);
  return out;
}

std::vector<Evidence> evidence(const Trace& trace) {
  const TraceMeta& m = trace.meta;
  const bool pools_known = m.pools.size() > 1;
  const std::unordered_set<Addr> held_privately = pools_known ? std::unordered_set<Addr>{} : private_segments(m);
  std::vector<Evidence> out;
  Shows shows = Shows::Nothing;
  bool alloc_in_private_segment = false;
  uint64_t allocs = 0;
  for (const Event& e : trace.events) {
    switch (e.kind) {
      case EventKind::SegmentMap:
        shows = Shows::On;
        break;
      case EventKind::SegmentAlloc:
        if (shows == Shows::Nothing) shows = Shows::Off;
        alloc_in_private_segment = alloc_in_private_segment || held_privately.contains(e.addr);
        break;
      case EventKind::Alloc: {
        const bool own_allocator = e.pool < m.pools.size() && m.pools[e.pool].own_allocator;
        if (shows == Shows::On) out.push_back({allocs, true});
        if (shows == Shows::Off && !own_allocator && !alloc_in_private_segment) out.push_back({allocs, false});
        ++allocs;
        [[fallthrough]];
      }
      case EventKind::Oom:
      case EventKind::Free:
      case EventKind::EmptyCache:
      case EventKind::PoolRelease:
        shows = Shows::Nothing;
        alloc_in_private_segment = false;
        break;
      default:
        break;
    }
  }
  return out;
}

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> flipped_event_ranges(
    const std::vector<Event>& events, const std::vector<std::pair<uint64_t, uint64_t>>& flipped) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  if (flipped.empty()) return out;
  // A range of Alloc ordinals [first, end) begins after Alloc #first-1 (at 0 for the first) and ends
  // with Alloc #end-1.
  auto range = flipped.begin();
  uint64_t allocs = 0, begin = 0;
  bool inside = range->first == 0;
  for (size_t i = 0; i < events.size() && range != flipped.end(); ++i) {
    if (events[i].kind != EventKind::Alloc) continue;
    ++allocs;  // Alloc #allocs-1 ends at i
    if (inside && allocs == range->second) {
      out.emplace_back(begin, i + 1);
      inside = false;
      ++range;
    }
    if (!inside && range != flipped.end() && allocs == range->first) {
      begin = i + 1;
      inside = true;
    }
  }
  if (inside) out.emplace_back(begin, events.size());
  return out;
}

namespace {

// The evidence's runs of one setting. Between two runs the program changed the setting somewhere after
// the earlier run's last request and at or before the later run's first: `at` is where the later run's
// setting is taken to begin (its first request, until the model shows an earlier one).
struct Run {
  bool on;
  uint64_t first, last;  // Alloc ordinals of the run's first and last evidence
  uint64_t at;
};

std::vector<Run> runs_of(const std::vector<Evidence>& seen) {
  std::vector<Run> runs;
  for (const Evidence& e : seen) {
    if (!runs.empty() && runs.back().on == e.on) {
      runs.back().last = e.alloc;
      continue;
    }
    runs.push_back({e.on, e.alloc, e.alloc, runs.empty() ? 0 : e.alloc});
  }
  return runs;
}

std::vector<std::pair<uint64_t, uint64_t>> flipped_windows(const std::vector<Run>& runs, bool recorded) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (size_t r = 0; r < runs.size(); ++r)
    if (runs[r].on != recorded) out.emplace_back(runs[r].at, r + 1 < runs.size() ? runs[r + 1].at : UINT64_MAX);
  return out;
}

// Rounds of the revision by the model's replay.
constexpr int kSwitchRevisions = 8;

// The Alloc ordinal of the request event `index` belongs to (its device calls come before it).
uint64_t alloc_ordinal(const std::vector<Event>& events, uint64_t index) {
  return static_cast<uint64_t>(std::count_if(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(index),
                                             [](const Event& e) { return e.kind == EventKind::Alloc; }));
}
}  // namespace

std::optional<uint64_t> first_divergence(const Trace& trace, const SnapshotModel& model) {
  if (!model.find_divergence) return std::nullopt;
  try {
    return model.find_divergence(trace);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<uint64_t> first_divergence_or_start(const Trace& trace, const SnapshotModel& model) {
  if (!model.find_divergence) return 0;
  try {
    return model.find_divergence(trace);
  } catch (const std::exception&) {
    return 0;
  }
}

void infer_expandable_switches(Trace& trace, const SnapshotModel& model, const HistoryIndex* index) {
  TraceMeta& m = trace.meta;
  const bool recorded = recorded_expandable(m);
  // Evidence of the other setting needs a device call of its kind: the only run is the recorded setting's.
  if (index && index->count(recorded ? EventKind::SegmentAlloc : EventKind::SegmentMap) == 0) {
    m.expandable_flipped.clear();
    return;
  }
  std::vector<Run> runs = runs_of(evidence(trace));
  // The snapshot's own setting held when it was taken: after the last run, if that run's differs.
  if (!runs.empty() && runs.back().on != recorded) runs.push_back({recorded, UINT64_MAX, UINT64_MAX, UINT64_MAX});
  // A change an earlier reading already placed inside its span stays there.
  for (size_t r = 1; r < runs.size(); ++r)
    for (const auto& [first, end] : m.expandable_flipped)
      for (uint64_t b : {first, end})
        if (b > runs[r - 1].last && b < runs[r].at) runs[r].at = b;
  m.expandable_flipped = flipped_windows(runs, recorded);
  if (!model.find_divergence || m.expandable_flipped.empty()) return;
  // A request the model serves otherwise than the recording, between a run's last evidence and the next
  // run's first, shows the next setting already held there (a block the other setting does not take, a
  // segment it makes that the recording did not): the change moves to it, and the model replays again.
  for (int round = 0; round < kSwitchRevisions; ++round) {
    const std::optional<uint64_t> at = first_divergence(trace, model);
    if (!at) return;
    const uint64_t k = alloc_ordinal(trace.events, std::min<uint64_t>(*at, trace.events.size()));
    size_t r = 1;
    while (r < runs.size() && !(k > runs[r - 1].last && k < runs[r].at)) ++r;
    if (r == runs.size()) return;
    runs[r].at = k;
    m.expandable_flipped = flipped_windows(runs, recorded);
  }
}

}  // namespace fraglab
