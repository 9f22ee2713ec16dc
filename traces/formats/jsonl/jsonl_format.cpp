#include "traces/formats/jsonl/jsonl_format.h"

#include <cmath>

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "traces/io/atomic_file.h"
#include "traces/io/format_error.h"
#include "traces/io/gzip.h"
#include "traces/io/json_depth.h"
#include "traces/io/read_limits.h"
#include "traces/io/text_lines.h"
#include "traces/state_json.h"
#include "traces/stream_interner.h"

namespace fraglab {

using json = nlohmann::json;

namespace {

// Sizes above this are taken for corrupt input rather than a real request (read_limits.h).
constexpr uint64_t kAbsurdSize = kMaxEventBytes;

struct JsonlParser {
  explicit JsonlParser(const std::string& n) : name(n) {}
  const std::string& name;
  Trace trace;
  IdSlots slots;
  std::unordered_map<std::string, AllocId> user_ids;  // user's id (as text) -> slot
  uint64_t line = 0;
  StreamInterner streams{trace.meta};

  [[noreturn]] void fail(const std::string& what) const { throw FormatError::at_line(name, line, what); }

  uint64_t get_u64(const json& obj, const char* key, uint64_t def, uint64_t max = UINT64_MAX) const {
    auto it = obj.find(key);
    if (it == obj.end()) return def;
    if (it->is_number_unsigned()) {
      uint64_t v = it->get<uint64_t>();
      if (v > max) fail(std::string("\"") + key + "\" is absurdly large (" + std::to_string(v) + ")");
      return v;
    }
    if (it->is_number_integer()) fail(std::string("\"") + key + "\" is negative");
    // nlohmann reads an integer beyond 64 bits as a float.
    if (it->is_number_float() && std::fabs(it->get<double>()) >= 9.2e18 && std::isfinite(it->get<double>()))
      fail(std::string("\"") + key + "\" is an integer out of range (64 bits at most)");
    fail(std::string("\"") + key + "\" must be a non-negative integer");
  }

  // Signed integers (times, line numbers). nlohmann's value()/get<int64_t>() would convert a
  // float such as 1e300 with a cast whose overflow is undefined behaviour, so check the kind.
  int64_t get_i64(const json& obj, const char* key, int64_t def) const {
    auto it = obj.find(key);
    if (it == obj.end()) return def;
    if (it->is_number_unsigned()) {
      uint64_t v = it->get<uint64_t>();
      if (v > static_cast<uint64_t>(INT64_MAX)) fail(std::string("\"") + key + "\" is out of range");
      return static_cast<int64_t>(v);
    }
    if (it->is_number_integer()) return it->get<int64_t>();
    fail(std::string("\"") + key + "\" must be an integer");
  }

  std::string get_string(const json& obj, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    if (!it->is_string()) fail(std::string("\"") + key + "\" must be a string");
    return it->get<std::string>();
  }

  std::string id_key(const json& obj) const {
    auto it = obj.find("id");
    if (it == obj.end()) fail("event has no \"id\"");
    if (it->is_string()) return "s" + it->get<std::string>();
    if (it->is_number_integer()) return "i" + it->dump();
    fail("\"id\" must be an integer or a string");
  }

  void header(const json& h) {
    TraceMeta& m = trace.meta;
    m.device = static_cast<int>(get_u64(h, "device", 0, 65535));  // the native meta's range
    if (auto s = h.find("streams"); s != h.end()) {
      if (!s->is_array()) fail("\"streams\" must be an array");
      m.streams.clear();
      streams = StreamInterner(m);
      for (const auto& v : *s) {
        if (!v.is_number_unsigned()) fail("stream handles must be non-negative integers");
        streams.intern(v.get<uint64_t>());
      }
      if (m.streams.empty()) {
        m.streams.push_back(0);
        streams = StreamInterner(m);
      }
    }
    if (auto s = h.find("allocator_settings"); s != h.end()) {
      if (!s->is_object()) fail("\"allocator_settings\" must be an object");
      for (const auto& [k, v] : s->items()) m.allocator_settings[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
    if (auto s = h.find("stacks"); s != h.end()) {
      if (!s->is_array()) fail("\"stacks\" must be an array");
      m.stacks.clear();
      for (const auto& stack : *s) {
        if (!stack.is_array()) fail("each stack must be an array of frames");
        std::vector<StackFrame> frames;
        for (const auto& f : stack) {
          if (!f.is_object()) fail("a frame must be an object");
          frames.push_back({get_string(f, "name"), get_string(f, "filename"), get_i64(f, "line", 0)});
        }
        m.stacks.push_back(std::move(frames));
      }
      if (m.stacks.empty()) m.stacks.emplace_back();
      // Stack 0 means "no stack" in every format; a file that says otherwise would convert to
      // a native trace that cannot be read back.
      if (!m.stacks[0].empty()) fail("\"stacks\"[0] must be the empty stack (stack 0 means no stack recorded)");
    }
    if (auto s = h.find("source"); s != h.end() && s->is_string()) m.source = s->get<std::string>();
    m.dropped_unknown_frees = get_u64(h, "dropped_unknown_frees", 0);
    m.dropped_stale_entries = get_u64(h, "dropped_stale_entries", 0);
    if (auto t = h.find("has_times"); t != h.end() && t->is_boolean()) m.has_times = t->get<bool>();
    if (auto t = h.find("history_absent"); t != h.end() && t->is_boolean()) m.history_absent = t->get<bool>();
    if (auto t = h.find("gpu_limit"); t != h.end() && t->is_boolean()) m.gpu_limit = t->get<bool>();
    m.gpu_total_memory = get_u64(h, "gpu_total_memory", 0);
    if (auto t = h.find("settings_inferred"); t != h.end() && t->is_boolean()) m.settings_inferred = t->get<bool>();
    if (auto t = h.find("annotations"); t != h.end()) m.annotations = annotations_from_json(*t);
    if (auto t = h.find("skipped_actions"); t != h.end()) m.skipped_actions = skipped_actions_from_json(*t);
    if (auto t = h.find("host"); t != h.end()) m.host = host_memory_from_json(*t);
    if (auto t = h.find("unreplayed"); t != h.end() && t->is_object())
      for (const auto& [k, v] : t->items())
        if (v.is_number_unsigned()) m.unreplayed.emplace_back(k, v.get<uint64_t>());
    try {  // the states (version 2 headers; version 1 had none)
      if (auto st = h.find("initial"); st != h.end())
        m.initial = initial_from_json(*st, m.streams.size(), m.stacks.size());
      if (auto st = h.find("segments"); st != h.end())
        m.segments = segments_from_json(*st, m.streams.size(), m.stacks.size());
      if (auto st = h.find("pools"); st != h.end()) m.pools = pools_from_json(*st);
      if (auto st = h.find("expandable_flipped"); st != h.end()) m.expandable_flipped = ranges_from_json(*st);
      if (auto st = h.find("compile_contexts"); st != h.end()) m.compile_contexts = compile_contexts_from_json(*st);
    } catch (const std::exception& e) {
      fail(std::string("the header's allocator state: ") + e.what());
    }
  }

  void event(const json& obj) {
    auto op = obj.find("op");
    if (op == obj.end() || !op->is_string()) fail("event has no \"op\" string");
    Event e;
    if (!parse_event_kind(op->get<std::string>(), e.kind)) fail("unknown op \"" + op->get<std::string>() + "\"");
    e.time_us = get_i64(obj, "t", 0);
    e.addr = get_u64(obj, "addr", 0);
    e.size = get_u64(obj, "size", 0, kAbsurdSize);
    e.stream = streams.intern(get_u64(obj, "stream", 0));
    e.stack = static_cast<StackId>(get_u64(obj, "stack", 0, UINT32_MAX));
    if (e.stack >= trace.meta.stacks.size()) fail("\"stack\" " + std::to_string(e.stack) + " is not in the header");
    e.pool = static_cast<PoolIndex>(get_u64(obj, "pool", 0, UINT16_MAX));
    if (e.pool >= trace.meta.pools.size()) fail("\"pool\" " + std::to_string(e.pool) + " is not in the header");
    e.compile_context = static_cast<ContextIndex>(get_u64(obj, "compile_context", 0, UINT16_MAX));
    if (e.compile_context > trace.meta.compile_contexts.size())
      fail("\"compile_context\" " + std::to_string(e.compile_context) + " is not in the header");
    switch (e.kind) {
      case EventKind::Alloc: {
        if (!obj.contains("size")) fail("alloc has no \"size\"");
        std::string key = id_key(obj);
        if (user_ids.count(key)) fail("alloc of id " + obj["id"].dump() + " which is already live");
        e.id = slots.acquire();
        user_ids.emplace(key, e.id);
        break;
      }
      case EventKind::FreeRequested:
      case EventKind::Free: {
        std::string key = id_key(obj);
        auto it = user_ids.find(key);
        if (it == user_ids.end()) fail(std::string(event_kind_name(e.kind)) + " of unknown id " + obj["id"].dump());
        e.id = it->second;
        if (e.kind == EventKind::Free) {
          slots.release(e.id);
          user_ids.erase(it);
        }
        break;
      }
      default:
        break;
    }
    trace.events.push_back(e);
  }
};

}  // namespace

Trace parse_jsonl(const std::string& text, const std::string& name) {
  JsonlParser p(name);
  p.trace.meta.format = "jsonl";
  p.trace.meta.source = name;
  bool first = true;
  for_each_line(text, p.line, [&](std::string_view line) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
    if (uint64_t at = json_too_deep_at(line, kMaxJsonDepth); at != UINT64_MAX)
      p.fail("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels at column " +
             std::to_string(at + 1));
    json obj = json::parse(line, nullptr, false);
    if (obj.is_discarded()) p.fail("not valid JSON");
    if (!obj.is_object()) p.fail("each line must be a JSON object");
    try {
      if (first && obj.contains("fraglab_trace"))
        p.header(obj);
      else
        p.event(obj);
    } catch (const TooManyStreams& e) {
      p.fail(e.what());
    }
    first = false;
  });
  if (first) throw FormatError::at_line(name, 1, "empty file: no header and no events (not a JSON Lines trace)");
  return std::move(p.trace);
}

Trace read_jsonl(const std::string& path) { return parse_jsonl(read_maybe_gzipped(path), path); }

namespace {

class JsonlWriter final : public TraceWriter {
 public:
  JsonlWriter(const std::string& path, const TraceMeta& meta) : file_(path), meta_(meta) {
    json h;
    h["fraglab_trace"] = meta.initial.empty() && meta.segments.empty() ? 1 : 2;
    h["device"] = meta.device;
    h["streams"] = meta.streams;
    h["allocator_settings"] = meta.allocator_settings;
    if (!meta.source.empty()) h["source"] = meta.source;
    if (meta.dropped_unknown_frees) h["dropped_unknown_frees"] = meta.dropped_unknown_frees;
    if (meta.dropped_stale_entries) h["dropped_stale_entries"] = meta.dropped_stale_entries;
    if (!meta.has_times) h["has_times"] = false;
    if (meta.history_absent) h["history_absent"] = true;
    if (meta.gpu_limit) h["gpu_limit"] = true;
    if (meta.gpu_total_memory) h["gpu_total_memory"] = meta.gpu_total_memory;
    if (meta.settings_inferred) h["settings_inferred"] = true;
    if (!meta.expandable_flipped.empty()) h["expandable_flipped"] = ranges_to_json(meta.expandable_flipped);
    if (!meta.annotations.empty()) h["annotations"] = annotations_to_json(meta.annotations);
    if (!meta.skipped_actions.empty()) h["skipped_actions"] = skipped_actions_to_json(meta.skipped_actions);
    if (meta.host.present()) h["host"] = host_memory_to_json(meta.host);
    for (const auto& [key, count] : meta.unreplayed) h["unreplayed"][key] = count;
    if (!meta.initial.empty()) h["initial"] = initial_to_json(meta.initial);
    if (!meta.segments.empty()) h["segments"] = segments_to_json(meta.segments);
    if (meta.pools.size() > 1) h["pools"] = pools_to_json(meta.pools);
    if (!meta.compile_contexts.empty()) h["compile_contexts"] = meta.compile_contexts;
    if (meta.stacks.size() > 1) {
      json stacks = json::array();
      for (const auto& s : meta.stacks) {
        json frames = json::array();
        for (const auto& f : s) frames.push_back({{"name", f.name}, {"filename", f.filename}, {"line", f.line}});
        stacks.push_back(frames);
      }
      h["stacks"] = stacks;
    }
    file_.write(h.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");  // names may hold any bytes
  }

  void write(const Event* events, size_t count) override {
    std::string out;
    for (size_t i = 0; i < count; ++i) {
      const Event& e = events[i];
      json j;
      j["op"] = event_kind_name(e.kind);
      if (e.kind == EventKind::Alloc || e.kind == EventKind::Free || e.kind == EventKind::FreeRequested) j["id"] = e.id;
      if (e.size || e.kind == EventKind::Alloc) j["size"] = e.size;
      if (e.addr) j["addr"] = e.addr;
      if (meta_.streams.at(e.stream) != 0) j["stream"] = meta_.streams[e.stream];
      if (e.time_us) j["t"] = e.time_us;
      if (e.stack) j["stack"] = e.stack;
      if (e.pool) j["pool"] = e.pool;
      if (e.compile_context) j["compile_context"] = e.compile_context;
      out += j.dump();
      out += '\n';
    }
    file_.write(out);
  }

  void finish() override { file_.commit(); }

 private:
  AtomicFile file_;
  TraceMeta meta_;
};

}  // namespace

std::unique_ptr<TraceWriter> create_jsonl_writer(const std::string& path, const TraceMeta& meta) {
  return std::make_unique<JsonlWriter>(path, meta);
}

}  // namespace fraglab
