#include "sim/export.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>

#include "allocators/policy_options.h"
#include "allocators/registry.h"
#include "traces/formats/pytorch/pickle_writer.h"
#include "traces/io/atomic_file.h"

namespace fraglab {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  std::string_view x(suffix);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

const char* action_name(EventKind k) {
  switch (k) {
    case EventKind::Alloc:
      return "alloc";
    case EventKind::FreeRequested:
      return "free_requested";
    case EventKind::Free:
      return "free_completed";
    case EventKind::SegmentAlloc:
      return "segment_alloc";
    case EventKind::SegmentFree:
      return "segment_free";
    case EventKind::SegmentMap:
      return "segment_map";
    case EventKind::SegmentUnmap:
      return "segment_unmap";
    case EventKind::Oom:
      return "oom";
    default:
      return nullptr;  // EmptyCache: PyTorch records only the segment frees it causes
  }
}

const char* state_name(RecordedBlock::State s) {
  switch (s) {
    case RecordedBlock::State::ActiveAllocated:
      return "active_allocated";
    case RecordedBlock::State::ActivePendingFree:
      return "active_pending_free";
    case RecordedBlock::State::Inactive:
      return "inactive";
  }
  return "inactive";
}

// Frames lists, each written once and referenced by memo afterwards (PyTorch shares one
// list object per captured traceback the same way).
class FramesWriter {
 public:
  FramesWriter(PickleWriter& w, const TraceMeta& meta) : w_(w), meta_(meta), handles_(meta.stacks.size(), UINT32_MAX) {}
  void write(StackId stack) {
    if (stack >= meta_.stacks.size()) stack = 0;
    if (handles_[stack] != UINT32_MAX) return w_.recall(handles_[stack]);
    handles_[stack] = w_.begin_list(true);
    for (const StackFrame& f : meta_.stacks[stack]) {
      w_.begin_dict();
      w_.interned("name");
      w_.interned(f.name);
      w_.interned("filename");
      w_.interned(f.filename);
      w_.interned("line");
      w_.integer(f.line);
      w_.end();
    }
    w_.end();
  }
  // The next write of each stack writes its list again. The segments, written after device_traces, do not
  // name the entries' lists: a reader that streams device_traces (fraglab's own, to keep a large snapshot
  // out of memory) has let those go by then, and reading segments that point back into it would make it
  // read the whole file into memory instead (5x the pickle, where it streams in under 2x).
  void forget() { std::fill(handles_.begin(), handles_.end(), UINT32_MAX); }

 private:
  PickleWriter& w_;
  const TraceMeta& meta_;
  std::vector<uint32_t> handles_;
};

// Settings were flattened on import ("roundup_power2_divisions.1024" -> "4", Python
// spellings); this restores the nesting and the types.
void write_setting_value(PickleWriter& w, const std::string& v) {
  if (v == "True" || v == "False") return w.boolean(v == "True");
  if (v == "None") return w.none();
  int64_t i;
  if (auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), i); ec == std::errc() && p == v.data() + v.size())
    return w.integer(i);
  double d;
  if (auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d); ec == std::errc() && p == v.data() + v.size())
    return w.floating(d);
  w.str(v);
}

void write_settings(PickleWriter& w, const std::map<std::string, std::string>& settings) {
  std::map<std::string, std::map<std::string, std::string>> nested;
  w.begin_dict();
  for (const auto& [k, v] : settings) {
    auto dot = k.find('.');
    if (dot != std::string::npos) {
      nested[k.substr(0, dot)][k.substr(dot + 1)] = v;
      continue;
    }
    w.interned(k);
    write_setting_value(w, v);
  }
  for (const auto& [k, sub] : nested) {
    w.interned(k);
    w.begin_dict();
    // PyTorch orders roundup_power2_divisions by interval (1, 2, 4, ...): numeric keys sort numerically.
    std::vector<std::pair<std::string, std::string>> items(sub.begin(), sub.end());
    std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
      return a.first.size() != b.first.size() ? a.first.size() < b.first.size() : a.first < b.first;
    });
    for (const auto& [sk, sv] : items) {
      w.interned(sk);
      write_setting_value(w, sv);
    }
    w.end();
  }
  w.end();
}

void write_segments(PickleWriter& w, FramesWriter& frames, const std::vector<RecordedSegment>& segments,
                    const TraceMeta& meta) {
  w.begin_list();
  for (const RecordedSegment& s : segments) {
    w.begin_dict();
    w.interned("device");
    w.integer(meta.device);
    w.interned("address");
    w.integer(static_cast<int64_t>(s.address));
    w.interned("total_size");
    w.integer(static_cast<int64_t>(s.total_size));
    w.interned("allocated_size");
    w.integer(static_cast<int64_t>(s.allocated_size));
    w.interned("active_size");
    w.integer(static_cast<int64_t>(s.active_size));
    w.interned("requested_size");
    w.integer(static_cast<int64_t>(s.requested_size));
    w.interned("stream");
    w.integer(static_cast<int64_t>(s.stream < meta.streams.size() ? meta.streams[s.stream] : 0));
    w.interned("segment_type");
    w.interned(s.small_pool ? "small" : "large");
    w.interned("segment_pool_id");
    w.begin_tuple();
    w.integer(s.pool_id[0]);
    w.integer(s.pool_id[1]);
    w.end();
    w.interned("is_expandable");
    w.boolean(s.is_expandable);
    w.interned("frames");
    frames.write(0);
    w.interned("blocks");
    w.begin_list();
    for (const RecordedBlock& b : s.blocks) {
      w.begin_dict();
      w.interned("address");
      w.integer(static_cast<int64_t>(b.address));
      w.interned("size");
      w.integer(static_cast<int64_t>(b.size));
      w.interned("requested_size");
      w.integer(static_cast<int64_t>(b.requested_size));
      w.interned("state");
      w.interned(state_name(b.state));
      w.interned("frames");
      frames.write(b.stack);
      w.end();
    }
    w.end();
    w.end();
  }
  w.end();
}

}  // namespace

ExportSummary export_snapshot(const Trace& trace, const PolicySpec& spec, const SimDeviceConfig& config,
                              const std::string& path) {
  AtomicFile file(path);
  PickleWriter w(file, ends_with(path, ".gz"));
  FramesWriter frames(w, trace.meta);
  const TraceMeta& meta = trace.meta;
  ExportSummary summary;

  // device_traces first: it streams while the replay runs; segments are known at the end.
  w.begin_dict();
  w.interned("device_traces");
  w.begin_list();
  for (int d = 0; d < meta.device; ++d) {
    w.begin_list();
    w.end();
  }
  w.begin_list();
  PlacedReplay placed = replay_placed(trace, spec, config, [&](const PlacedEvent& p) {
    const char* action = action_name(p.event.kind);
    // A history begun mid-run stays one: the state at its first entry is in the final segments and the
    // history's frees, as in the recording, not entries PyTorch never wrote (its segments allocated and
    // its live blocks allocated at time zero).
    if (!action || p.prologue) return;
    const Event& e = p.event;
    const Event& cause = trace.events[p.event_index];
    w.begin_dict();
    w.interned("action");
    w.interned(action);
    w.interned(e.kind == EventKind::Oom ? "device_free" : "addr");
    w.integer(static_cast<int64_t>(e.addr));
    w.interned("size");
    w.integer(static_cast<int64_t>(e.size));
    w.interned("stream");
    w.integer(static_cast<int64_t>(cause.stream < meta.streams.size() ? meta.streams[cause.stream] : 0));
    w.interned("time_us");
    w.integer(e.time_us);
    w.interned("compile_context");
    const std::string* context = meta.compile_context_of(cause);  // PyTorch writes "N/A" for none
    w.interned(context ? std::string_view(*context) : std::string_view("N/A"));
    w.interned("user_metadata");
    w.interned("");
    w.interned("frames");
    frames.write(is_device_event(e.kind) ? cause.stack : e.stack);
    w.end();
    ++summary.records;
  });
  w.end();  // this device's entries
  w.end();  // device_traces
  w.interned("segments");
  frames.forget();
  write_segments(w, frames, placed.segments, meta);
  w.interned("allocator_settings");
  // Settings the importer inferred (the snapshot recorded none) are not written as if recorded.
  write_settings(w, meta.settings_inferred ? std::map<std::string, std::string>{} : meta.allocator_settings);
  w.interned("external_annotations");
  w.begin_list();
  w.end();
  w.end();
  w.finish();
  file.commit();
  summary.result = std::move(placed.result);
  return summary;
}

ExportSummary export_perfetto(const Trace& trace, const PolicySpec& spec, const SimDeviceConfig& config,
                              const std::string& path) {
  using json = nlohmann::json;
  AtomicFile file(path);
  ExportSummary summary;
  // Recorded time when the trace has it; otherwise event indices stand in for microseconds.
  bool timed = !trace.events.empty() && trace.events.front().time_us != trace.events.back().time_us;
  int64_t t0 = timed ? trace.events.front().time_us : 0;
  auto ts = [&](const PlacedEvent& p) {
    if (!timed) return static_cast<int64_t>(p.event_index);
    int64_t d;  // saturated: recorded times are not checked for range, and may be hostile
    if (__builtin_sub_overflow(p.event.time_us, t0, &d)) d = p.event.time_us < t0 ? INT64_MIN : INT64_MAX;
    return d;
  };

  std::string buf = "{\"displayTimeUnit\":\"ms\",\"otherData\":";
  buf += json{{"tool", "fraglab"}, {"trace", trace.meta.source}, {"policy", spec.text}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
  buf += ",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const json& j) {
    if (!first) buf += ",\n";
    first = false;
    buf += j.dump(-1, ' ', false, json::error_handler_t::replace);
    ++summary.records;
    if (buf.size() > (1u << 20)) {
      file.write(buf);
      buf.clear();
    }
  };
  emit({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", "fraglab " + spec.text}}}});
  for (size_t s = 0; s < trace.meta.streams.size(); ++s)
    emit({{"ph", "M"},
          {"name", "thread_name"},
          {"pid", 1},
          {"tid", s},
          {"args", {{"name", fmt::format("stream {:#x}", trace.meta.streams[s])}}}});

  uint64_t last_reserved = UINT64_MAX, last_allocated = UINT64_MAX;
  PlacedReplay placed = replay_placed(trace, spec, config, [&](const PlacedEvent& p) {
    const Event& e = p.event;
    int64_t t = ts(p);
    switch (e.kind) {
      case EventKind::Alloc:
        emit({{"ph", "b"},
              {"cat", "allocation"},
              {"name", fmt::format("{} B", e.size)},
              {"id", p.event_index},
              {"pid", 1},
              {"tid", e.stream},
              {"ts", t},
              {"args", {{"addr", fmt::format("{:#x}", e.addr)}, {"requested", e.size}, {"block", p.block_size}}}});
        break;
      case EventKind::Free:
        emit({{"ph", "e"},
              {"cat", "allocation"},
              {"name", fmt::format("{} B", e.size)},
              {"id", p.alloc_index},
              {"pid", 1},
              {"tid", e.stream},
              {"ts", t}});
        break;
      case EventKind::Oom:
        emit({{"ph", "i"},
              {"s", "p"},
              {"name", "out of memory"},
              {"pid", 1},
              {"tid", e.stream},
              {"ts", t},
              {"args", {{"requested", e.size}}}});
        break;
      case EventKind::SegmentAlloc:
      case EventKind::SegmentFree:
      case EventKind::SegmentMap:
      case EventKind::SegmentUnmap:
        emit({{"ph", "i"},
              {"s", "p"},
              {"name", event_kind_name(e.kind)},
              {"pid", 1},
              {"tid", 0},
              {"ts", t},
              {"args", {{"addr", fmt::format("{:#x}", e.addr)}, {"size", e.size}}}});
        break;
      default:
        break;
    }
    if (p.reserved != last_reserved || p.allocated != last_allocated) {
      emit({{"ph", "C"},
            {"name", "memory"},
            {"pid", 1},
            {"ts", t},
            {"args", {{"reserved", p.reserved}, {"allocated", p.allocated}, {"requested", p.requested}}}});
      last_reserved = p.reserved;
      last_allocated = p.allocated;
    }
  });
  buf += "\n]}\n";
  file.write(buf);
  file.commit();
  summary.result = std::move(placed.result);
  return summary;
}

}  // namespace fraglab
