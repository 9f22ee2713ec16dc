// The native trace format's codec: a block of events to and from its column bytes, and the
// meta to and from its JSON; the layout is described in native_format.h, the writer and the
// reader that frame them with zstd are native_writer.cpp and native_reader.cpp.
//
// Hand-written rather than e.g. Cap'n Proto or FlatBuffers (not needed as a dependency for
// one flat record type): the columns are plain varints so the decoder is a handful of tight
// loops, and zstd (libzstd) does the entropy coding.
#include <zstd.h>

#include <fmt/core.h>
#include <bit>
#include <cstring>

#include <nlohmann/json.hpp>

#include "traces/formats/native/native_format_detail.h"
#include "traces/io/format_error.h"
#include "traces/io/read_limits.h"
#include "traces/state_json.h"

namespace fraglab {

using json = nlohmann::json;
using namespace native_detail;

namespace native_detail {

std::string zstd_error(size_t code) { return std::string("zstd: ") + ZSTD_getErrorName(code); }

namespace {

inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

inline uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

}  // namespace

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

namespace {

// Bytes needed to hold v (0 for 0): size and addr are stored in that many little-endian
// bytes, the count kept in the lengths column, so decoding them is a load and a mask.
inline unsigned byte_length(uint64_t v) { return v ? (64 - static_cast<unsigned>(__builtin_clzll(v)) + 7) / 8 : 0; }

inline uint8_t* put_fixed(uint8_t* p, uint64_t v, unsigned len) {
  for (unsigned k = 0; k < len; ++k) p[k] = static_cast<uint8_t>(v >> (8 * k));
  return p + len;
}

}  // namespace

void encode_block(const Event* events, size_t count, std::vector<uint8_t>& raw, BlockScratch& scratch) {
  for (auto& c : scratch.columns) c.resize(count * 10);
  uint8_t* col[kColumns];
  for (int c = 0; c < kColumns; ++c) col[c] = scratch.columns[c].data();
  raw.resize(kColumnTableBytes + 2 * count);
  uint8_t* flags = raw.data() + kColumnTableBytes;
  uint8_t* lengths = flags + count;
  int64_t prev_time = 0;
  uint64_t prev_addr = 0;
  for (size_t i = 0; i < count; ++i) {
    const Event& e = events[i];
    uint8_t f = static_cast<uint8_t>(e.kind);
    col[kId] = put_varint(col[kId], e.id);
    col[kTime] = put_varint(
        col[kTime], zigzag(static_cast<int64_t>(static_cast<uint64_t>(e.time_us) - static_cast<uint64_t>(prev_time))));
    prev_time = e.time_us;
    unsigned size_len = byte_length(e.size);
    col[kSize] = put_fixed(col[kSize], e.size, size_len);
    unsigned addr_code = 0;  // 0: no address; else 1 + byte length of the delta
    if (e.addr) {
      uint64_t delta = zigzag(static_cast<int64_t>(e.addr - prev_addr));
      unsigned len = byte_length(delta);
      col[kAddr] = put_fixed(col[kAddr], delta, len);
      addr_code = len + 1;
      prev_addr = e.addr;
    }
    if (e.stream) f |= kHasStream, col[kStream] = put_varint(col[kStream], e.stream);
    if (e.stack) f |= kHasStack, col[kStack] = put_varint(col[kStack], e.stack);
    flags[i] = f;
    lengths[i] = static_cast<uint8_t>(size_len | (addr_code << 4));
  }
  for (int c = 0; c < kColumns; ++c) {
    size_t len = static_cast<size_t>(col[c] - scratch.columns[c].data());
    put_u32(raw.data() + 4 * c, static_cast<uint32_t>(len));
    raw.insert(raw.end(), scratch.columns[c].data(), col[c]);
  }
}

namespace {

constexpr const char* kColumnNames[kColumns] = {"id", "time", "size", "addr", "stream", "stack"};

// One varint at p, which may read up to 10 bytes past the column (the caller pads the
// block), so the common path has no bounds test inside; the caller checks p afterwards.
inline uint64_t get_varint_padded(const uint8_t*& p, bool& overlong) {
  uint64_t b = *p++;
  if (b < 0x80) [[likely]]
    return b;
  uint64_t r = b & 0x7f;
  for (int shift = 7; shift < 64; shift += 7) {
    b = *p++;
    r |= (b & 0x7f) << shift;
    if (b < 0x80) {
      overlong = shift == 63 && b > 1;  // a 10th byte may only hold bit 63
      return r;
    }
  }
  overlong = true;  // an 11th byte would follow
  return r;
}

constexpr uint64_t kLowBytes[9] = {
    0, 0xff, 0xffff, 0xffffff, 0xffffffff, 0xffffffffff, 0xffffffffffff, 0xffffffffffffff, ~uint64_t{0}};

inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// The next value of a column; false (cursor unmoved) when the column is exhausted, the
// varint is overlong or runs past the column's end.
__attribute__((always_inline)) inline bool next_varint(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  if (p >= end) [[unlikely]]
    return false;
  const uint8_t* start = p;
  bool overlong = false;
  v = get_varint_padded(p, overlong);
  if (overlong || p > end) [[unlikely]] {
    p = start;
    return false;
  }
  return true;
}

}  // namespace

// One pass over the events, one cursor per column: each event is written once, while it
// is in cache (column-by-column passes over a 64K-event block measured slower).
void decode_block(const uint8_t* raw, size_t raw_size, Event* events, size_t count, const BlockLimits& limits,
                  LiveIds* live, const BlockErrorFn& on_error) {
  auto fail = [&on_error](uint64_t raw_offset, const std::string& what) {
    on_error(raw_offset, what);
    throw std::logic_error("native block error handler returned");  // it must throw
  };
  if (raw_size < kColumnTableBytes + 2 * count) fail(0, "block is shorter than its flags and lengths columns");
  const uint8_t* flags = raw + kColumnTableBytes;
  const uint8_t* lengths = flags + count;
  const uint8_t* cur[kColumns];
  const uint8_t* end[kColumns];
  size_t at = kColumnTableBytes + 2 * count;
  for (int c = 0; c < kColumns; ++c) {
    uint64_t len = get_u32(raw + 4 * c);
    if (len > raw_size - at)
      fail(4 * static_cast<uint64_t>(c),
           std::string(kColumnNames[c]) + " column length " + std::to_string(len) + " runs past the block");
    cur[c] = raw + at;
    at += len;
    end[c] = raw + at;
  }
  if (at != raw_size) fail(at, "block has " + std::to_string(raw_size - at) + " bytes after its last column");

  size_t i = 0;
  auto column_error = [&](int c, const char* what) {
    fail(static_cast<uint64_t>(cur[c] - raw),
         std::string(kColumnNames[c]) + " column, event " + std::to_string(i) + ": " + what);
  };
  // Out of line: says why column c could not give event i its value.
  auto bad_varint = [&](int c) {
    if (cur[c] >= end[c]) column_error(c, "the column ends before its events do");
    bool overlong = false;
    const uint8_t* p = cur[c];
    get_varint_padded(p, overlong);
    column_error(c, overlong ? "corrupt varint (more than 64 bits)" : "the column ends inside a varint");
  };
  auto next = [&](int c) __attribute__((always_inline))->uint64_t {
    uint64_t v = 0;
    if (!next_varint(cur[c], end[c], v)) [[unlikely]]
      bad_varint(c);
    return v;
  };

  // A fixed-width field: a load and a mask, no branch on the length. The cursor may run
  // past its column by at most 8 bytes before the test after it catches that.
  auto fixed = [&](int c, unsigned len) __attribute__((always_inline))->uint64_t {
    uint64_t v = load_le64(cur[c]) & kLowBytes[len];
    cur[c] += len;
    if (cur[c] > end[c]) [[unlikely]] {
      cur[c] -= len;
      column_error(c, "the column ends before its events do");
    }
    return v;
  };

  int64_t time = 0;
  uint64_t addr = 0;
  for (; i < count; ++i) {
    const uint8_t f = flags[i], l = lengths[i];
    Event& e = events[i];
    e.kind = static_cast<EventKind>(f & kKindMask);
    if ((f & kKindMask) >= kEventKindCount || (f & kReservedFlags)) [[unlikely]]
      fail(kColumnTableBytes + i, "event " + std::to_string(i) + " has unknown kind or flags " + std::to_string(f));
    const unsigned size_len = l & 0x0f, addr_code = l >> 4;
    if (size_len > 8 || addr_code > 9) [[unlikely]]
      fail(kColumnTableBytes + count + i,
           "event " + std::to_string(i) + " has a bad lengths byte " + std::to_string(l));
    uint64_t id = next(kId);
    if (id > UINT32_MAX) [[unlikely]]
      column_error(kId, "id does not fit 32 bits");
    e.id = static_cast<AllocId>(id);
    time = static_cast<int64_t>(static_cast<uint64_t>(time) + static_cast<uint64_t>(unzigzag(next(kTime))));
    e.time_us = time;
    e.size = fixed(kSize, size_len);
    if (e.size > kMaxEventBytes) [[unlikely]]
      column_error(kSize, "size larger than 2^48 bytes (corrupt)");
    const bool has_addr = addr_code != 0;
    uint64_t moved = addr + static_cast<uint64_t>(unzigzag(fixed(kAddr, addr_code - has_addr)));
    addr = has_addr ? moved : addr;
    e.addr = has_addr ? moved : 0;
    uint64_t stream = (f & kHasStream) ? next(kStream) : 0;
    if (stream >= limits.streams) [[unlikely]]
      column_error(kStream, "stream index not in the trace's stream table");
    e.stream = static_cast<StreamIndex>(stream);
    uint64_t stack = (f & kHasStack) ? next(kStack) : 0;
    if (stack >= limits.stacks) [[unlikely]]
      column_error(kStack, "stack id not in the trace's stack table");
    e.stack = static_cast<StackId>(stack);
    if (live) {
      if (const char* err = live->apply(e)) [[unlikely]]
        fail(kColumnTableBytes + i, "event " + std::to_string(i) + ": " + err + " (id " + std::to_string(e.id) + ")");
    }
  }
  for (int c = 0; c < kColumns; ++c)
    if (cur[c] != end[c]) column_error(c, "the column holds bytes beyond its last value");
}

json unreplayed_json(const TraceMeta& m) {
  json out = json::object();
  for (const auto& [key, count] : m.unreplayed) out[key] = count;
  return out;
}

json meta_to_json(const TraceMeta& m) {
  json stacks = json::array();
  for (const auto& s : m.stacks) {
    json frames = json::array();
    for (const auto& f : s) frames.push_back(json::array({f.name, f.filename, f.line}));
    stacks.push_back(std::move(frames));
  }
  json out = {{"source", m.source},
              {"format", m.format},
              {"device", m.device},
              {"streams", m.streams},
              {"allocator_settings", m.allocator_settings},
              {"stacks", std::move(stacks)},
              {"dropped_unknown_frees", m.dropped_unknown_frees},
              {"has_times", m.has_times},
              {"history_absent", m.history_absent},
              {"unreplayed", unreplayed_json(m)},
              {"initial", initial_to_json(m.initial)},
              {"segments", segments_to_json(m.segments)},
              {"pools", pools_to_json(m.pools)}};
  if (m.gpu_limit) out["gpu_limit"] = true;  // only when set: files without it read as before
  if (m.gpu_total_memory) out["gpu_total_memory"] = m.gpu_total_memory;
  if (!m.compile_contexts.empty()) out["compile_contexts"] = m.compile_contexts;
  if (m.settings_inferred) out["settings_inferred"] = true;
  if (m.dropped_stale_entries) out["dropped_stale_entries"] = m.dropped_stale_entries;
  if (!m.expandable_flipped.empty()) out["expandable_flipped"] = ranges_to_json(m.expandable_flipped);
  if (!m.annotations.empty()) out["annotations"] = annotations_to_json(m.annotations);
  if (!m.skipped_actions.empty()) out["skipped_actions"] = skipped_actions_to_json(m.skipped_actions);
  if (m.host.present()) out["host"] = host_memory_to_json(m.host);
  return out;
}

// Checked conversions: nlohmann's get<integer>() on a float value is a cast whose overflow is
// undefined behaviour, so the kind is checked first. Errors are std::out_of_range, which the
// caller turns into a FormatError with the meta section's offset.
static uint64_t meta_u64(const json& v, const char* what) {
  if (!v.is_number_unsigned()) throw std::out_of_range(std::string(what) + " must be a non-negative integer");
  return v.get<uint64_t>();
}
static int64_t meta_i64(const json& v, const char* what) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw std::out_of_range(std::string(what) + " is out of range");
  if (!v.is_number_integer()) throw std::out_of_range(std::string(what) + " must be an integer");
  return v.get<int64_t>();
}

// Throws nlohmann::json exceptions on a wrong shape; the caller turns them into FormatError.
TraceMeta meta_from_json(const json& j) {
  TraceMeta m;
  m.source = j.at("source").get<std::string>();
  m.format = j.at("format").get<std::string>();
  uint64_t device = meta_u64(j.at("device"), "device");
  if (device > 65535) throw std::out_of_range("device index " + std::to_string(device) + " is absurd");
  m.device = static_cast<int>(device);
  m.streams.clear();
  for (const auto& s : j.at("streams")) m.streams.push_back(meta_u64(s, "a stream handle"));
  m.allocator_settings = j.at("allocator_settings").get<std::map<std::string, std::string>>();
  m.stacks.clear();
  for (const auto& s : j.at("stacks")) {
    std::vector<StackFrame> frames;
    for (const auto& f : s)
      frames.push_back({f.at(0).get<std::string>(), f.at(1).get<std::string>(), meta_i64(f.at(2), "a frame's line")});
    m.stacks.push_back(std::move(frames));
  }
  m.dropped_unknown_frees = meta_u64(j.at("dropped_unknown_frees"), "dropped_unknown_frees");
  if (m.streams.empty() || m.streams.size() > 65536)
    throw std::out_of_range("stream table must hold 1 to 65536 streams");
  if (m.stacks.empty() || !m.stacks[0].empty()) throw std::out_of_range("stack table must start with the empty stack");
  // Keys added later (absent from older files, which read as before).
  if (auto it = j.find("has_times"); it != j.end()) m.has_times = it->get<bool>();
  if (auto it = j.find("history_absent"); it != j.end()) m.history_absent = it->get<bool>();
  if (auto it = j.find("gpu_limit"); it != j.end()) m.gpu_limit = it->get<bool>();
  if (auto it = j.find("gpu_total_memory"); it != j.end()) m.gpu_total_memory = meta_u64(*it, "gpu_total_memory");
  if (auto it = j.find("settings_inferred"); it != j.end()) m.settings_inferred = it->get<bool>();
  if (auto it = j.find("dropped_stale_entries"); it != j.end())
    m.dropped_stale_entries = meta_u64(*it, "dropped_stale_entries");
  if (auto it = j.find("expandable_flipped"); it != j.end()) m.expandable_flipped = ranges_from_json(*it);
  if (auto it = j.find("annotations"); it != j.end()) m.annotations = annotations_from_json(*it);
  if (auto it = j.find("skipped_actions"); it != j.end()) m.skipped_actions = skipped_actions_from_json(*it);
  if (auto it = j.find("host"); it != j.end()) m.host = host_memory_from_json(*it);
  if (auto it = j.find("unreplayed"); it != j.end())
    for (const auto& [k, v] : it->items()) m.unreplayed.emplace_back(k, meta_u64(v, "an unreplayed item count"));
  if (auto it = j.find("initial"); it != j.end()) m.initial = initial_from_json(*it, m.streams.size(), m.stacks.size());
  if (auto it = j.find("segments"); it != j.end())
    m.segments = segments_from_json(*it, m.streams.size(), m.stacks.size());
  if (auto it = j.find("pools"); it != j.end()) m.pools = pools_from_json(*it);
  if (auto it = j.find("compile_contexts"); it != j.end()) m.compile_contexts = compile_contexts_from_json(*it);
  return m;
}

namespace {

// [[event index, value], ...] for the events whose value is not 0, indices rising; each value in
// [1, limit). `key`, `noun` and `table` word the errors ("event_pools names pool 3, not in the pool table").
std::vector<std::pair<uint64_t, uint16_t>> sparse_event_values(const json& j, uint64_t events, size_t limit,
                                                               const char* key, const char* noun, const char* table) {
  std::vector<std::pair<uint64_t, uint16_t>> out;
  if (!j.is_array()) throw std::out_of_range(std::string(key) + " must be a list");
  for (const auto& p : j) {
    if (!p.is_array() || p.size() != 2)
      throw std::out_of_range(fmt::format("an {} entry must be [event, {}]", key, noun));
    uint64_t index = meta_u64(p[0], "an event index"), value = meta_u64(p[1], fmt::format("a {}", noun).c_str());
    if (index >= events || (!out.empty() && index <= out.back().first))
      throw std::out_of_range(std::string(key) + " indices must rise and stay below the event count");
    if (value == 0 || value >= limit)
      throw std::out_of_range(fmt::format("{} names {} {}, not in the {}", key, noun, value, table));
    out.emplace_back(index, static_cast<uint16_t>(value));
  }
  return out;
}

}  // namespace

// Events' pools (Event::pool), sparse: [[event index, pool], ...] for the events not in pool 0.
// They live in the meta rather than in a column so that files without pools stay as they were.
std::vector<std::pair<uint64_t, PoolIndex>> event_pools_from_json(const json& j, uint64_t events, size_t pools) {
  return sparse_event_values(j, events, pools, "event_pools", "pool", "pool table");
}

// Events' compile contexts (Event::compile_context), sparse in the same way.
std::vector<std::pair<uint64_t, ContextIndex>> event_contexts_from_json(const json& j, uint64_t events,
                                                                        size_t contexts) {
  return sparse_event_values(j, events, contexts + 1, "event_compile_contexts", "compile context",
                             "compile_contexts list");
}

}  // namespace native_detail

}  // namespace fraglab
