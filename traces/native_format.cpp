// The native trace format; the layout is described in native_format.h.
//
// Hand-written rather than e.g. Cap'n Proto or FlatBuffers (not needed as a dependency for
// one flat record type): the columns are plain varints so the decoder is a handful of tight
// loops, and zstd (libzstd) does the entropy coding.
#include "traces/native_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "traces/atomic_file.h"
#include "traces/format_error.h"
#include "traces/state_json.h"
#include "traces/json_depth.h"
#include "traces/native_format_detail.h"
#include "traces/read_limits.h"

namespace fraglab {

using json = nlohmann::json;
using namespace native_detail;

// ---------------------------------------------------------------------------------------
// Block encoding and decoding (raw, before zstd).

namespace native_detail {

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
    col[kTime] = put_varint(col[kTime], zigzag(static_cast<int64_t>(static_cast<uint64_t>(e.time_us) -
                                                                    static_cast<uint64_t>(prev_time))));
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

constexpr uint64_t kLowBytes[9] = {0,           0xff,           0xffff,           0xffffff,          0xffffffff,
                                   0xffffffffff, 0xffffffffffff, 0xffffffffffffff, ~uint64_t{0}};

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
  auto next = [&](int c) __attribute__((always_inline)) -> uint64_t {
    uint64_t v = 0;
    if (!next_varint(cur[c], end[c], v)) [[unlikely]]
      bad_varint(c);
    return v;
  };

  // A fixed-width field: a load and a mask, no branch on the length. The cursor may run
  // past its column by at most 8 bytes before the test after it catches that.
  auto fixed = [&](int c, unsigned len) __attribute__((always_inline)) -> uint64_t {
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
      fail(kColumnTableBytes + count + i, "event " + std::to_string(i) + " has a bad lengths byte " + std::to_string(l));
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
    if (cur[c] != end[c])
      column_error(c, "the column holds bytes beyond its last value");
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
  return {{"source", m.source},
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
  if (m.streams.empty() || m.streams.size() > 65536) throw std::out_of_range("stream table must hold 1 to 65536 streams");
  if (m.stacks.empty() || !m.stacks[0].empty()) throw std::out_of_range("stack table must start with the empty stack");
  // Keys added later (absent from older files, which read as before).
  if (auto it = j.find("has_times"); it != j.end()) m.has_times = it->get<bool>();
  if (auto it = j.find("history_absent"); it != j.end()) m.history_absent = it->get<bool>();
  if (auto it = j.find("unreplayed"); it != j.end())
    for (const auto& [k, v] : it->items()) m.unreplayed.emplace_back(k, meta_u64(v, "an unreplayed item count"));
  if (auto it = j.find("initial"); it != j.end()) m.initial = initial_from_json(*it, m.streams.size(), m.stacks.size());
  if (auto it = j.find("segments"); it != j.end()) m.segments = segments_from_json(*it, m.streams.size(), m.stacks.size());
  if (auto it = j.find("pools"); it != j.end()) m.pools = pools_from_json(*it);
  return m;
}

// Events' pools (Event::pool), sparse: [[event index, pool], ...] for the events not in pool 0.
// They live in the meta rather than in a column so that files without pools stay as they were.
std::vector<std::pair<uint64_t, PoolIndex>> event_pools_from_json(const json& j, uint64_t events, size_t pools) {
  std::vector<std::pair<uint64_t, PoolIndex>> out;
  if (!j.is_array()) throw std::out_of_range("event_pools must be a list");
  for (const auto& p : j) {
    if (!p.is_array() || p.size() != 2) throw std::out_of_range("an event_pools entry must be [event, pool]");
    uint64_t index = meta_u64(p[0], "an event index"), pool = meta_u64(p[1], "a pool");
    if (index >= events || (!out.empty() && index <= out.back().first))
      throw std::out_of_range("event_pools indices must rise and stay below the event count");
    if (pool == 0 || pool >= pools) throw std::out_of_range("event_pools names pool " + std::to_string(pool) + ", not in the pool table");
    out.emplace_back(index, static_cast<PoolIndex>(pool));
  }
  return out;
}

}  // namespace native_detail

// ---------------------------------------------------------------------------------------
// Writer.

namespace {

std::string zstd_error(size_t code) { return std::string("zstd: ") + ZSTD_getErrorName(code); }

class NativeWriterImpl final : public NativeWriter {
 public:
  NativeWriterImpl(const std::string& path, const TraceMeta& meta, const NativeWriterOptions& options)
      : path_(path), file_(path), meta_(meta), options_(options), cctx_(ZSTD_createCCtx()) {
    if (options_.block_events == 0 || options_.block_events > kMaxBlockEvents)
      throw std::invalid_argument("native writer: block_events must be 1.." + std::to_string(kMaxBlockEvents));
    if (!cctx_) throw std::runtime_error("zstd: cannot create a compression context");
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, options_.zstd_level);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);  // the reader catches corrupt payloads
    pending_.reserve(options_.block_events);
    uint8_t header[kHeaderBytes] = {};
    std::memcpy(header, kMagic, 8);
    put_u32(header + 8, kNativeVersion);
    put_u32(header + 12, kHeaderBytes);
    file_.write(header, sizeof header);
    offset_ = kHeaderBytes;
  }
  ~NativeWriterImpl() override { ZSTD_freeCCtx(cctx_); }

  void set_meta(const TraceMeta& meta) override { meta_ = meta; }

  void write(const Event* events, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      check(events[i]);
      if (events[i].pool) event_pools_.push_back(json::array({events_ + pending_.size(), events[i].pool}));
      pending_.push_back(events[i]);
      if (pending_.size() == options_.block_events) flush_block();
    }
  }

  void finish() override {
    validate_meta();
    if (!pending_.empty()) flush_block();
    json meta = meta_to_json(meta_);
    if (!event_pools_.empty()) meta["event_pools"] = std::move(event_pools_);
    std::string text = meta.dump(-1, ' ', false, json::error_handler_t::replace);  // names may hold any bytes
    compress(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    uint8_t section[kSectionBytes] = {};
    std::memcpy(section, kMetaTag, 4);
    put_u64(section + 8, text.size());
    put_u64(section + 16, compressed_.size());
    uint64_t meta_offset = offset_;
    emit(section, sizeof section);
    emit(compressed_.data(), compressed_.size());
    uint8_t footer[kFooterBytes];
    put_u64(footer, meta_offset);
    put_u64(footer + 8, events_);
    put_u64(footer + 16, blocks_);
    std::memcpy(footer + 24, kEndMagic, 8);
    emit(footer, sizeof footer);
    file_.commit();
  }

 private:
  // Refuses events the reader would reject, so every file this writes reads back.
  void check(const Event& e) {
    auto bad = [&](const std::string& what) {
      throw std::invalid_argument("native writer (" + path_ + "), event " + std::to_string(events_ + pending_.size()) +
                                  ": " + what);
    };
    if (static_cast<int>(e.kind) >= kEventKindCount) bad("unknown event kind");
    if (e.size > kMaxEventBytes) bad("size " + std::to_string(e.size) + " is larger than 2^48 bytes");
    // Streams and stacks may still be interned later (set_meta), so only the
    // 16-bit stream index range is checked here; finish() checks against the final meta.
    if (e.stream > max_stream_) max_stream_ = e.stream;
    if (e.stack > max_stack_) max_stack_ = e.stack;
    if (e.pool > max_pool_) max_pool_ = e.pool;
    if (const char* err = live_.apply(e)) bad(std::string(err) + " (id " + std::to_string(e.id) + ")");
  }

  void flush_block() {
    encode_block(pending_.data(), pending_.size(), raw_, scratch_);
    compress(raw_.data(), raw_.size());
    uint8_t header[kBlockHeaderBytes];
    std::memcpy(header, kBlockTag, 4);
    put_u32(header + 4, static_cast<uint32_t>(pending_.size()));
    put_u32(header + 8, static_cast<uint32_t>(raw_.size()));
    put_u32(header + 12, static_cast<uint32_t>(compressed_.size()));
    put_u64(header + 16, events_);
    emit(header, sizeof header);
    emit(compressed_.data(), compressed_.size());
    events_ += pending_.size();
    ++blocks_;
    pending_.clear();
  }

  void compress(const uint8_t* data, size_t size) {
    compressed_.resize(ZSTD_compressBound(size));
    size_t n = ZSTD_compress2(cctx_, compressed_.data(), compressed_.size(), data, size);
    if (ZSTD_isError(n)) throw std::runtime_error("cannot write " + path_ + ": " + zstd_error(n));
    compressed_.resize(n);
  }

  void emit(const void* data, size_t size) {
    file_.write(data, size);
    offset_ += size;
  }

  // Checked at finish: every stream and stack the events named is in the final meta.
  void validate_meta() const {
    // The reader's rules for the tables (meta_from_json), so nothing is written that cannot be read.
    if (meta_.streams.empty() || meta_.streams.size() > kMaxStreamIndex + 1)
      throw std::invalid_argument("native writer (" + path_ + "): the stream table must hold 1 to 65536 streams, not " +
                                  std::to_string(meta_.streams.size()));
    if (meta_.stacks.empty() || !meta_.stacks[0].empty())
      throw std::invalid_argument("native writer (" + path_ + "): the stack table must start with the empty stack");
    if (max_stream_ >= meta_.streams.size())
      throw std::invalid_argument("native writer (" + path_ + "): events use stream index " +
                                  std::to_string(max_stream_) + " but the meta has " +
                                  std::to_string(meta_.streams.size()) + " streams");
    if (max_pool_ >= meta_.pools.size())
      throw std::invalid_argument("native writer (" + path_ + "): events use pool " + std::to_string(max_pool_) +
                                  " but the meta has " + std::to_string(meta_.pools.size()) + " pools");
    if (max_stack_ >= meta_.stacks.size())
      throw std::invalid_argument("native writer (" + path_ + "): events use stack " + std::to_string(max_stack_) +
                                  " but the meta has " + std::to_string(meta_.stacks.size()) + " stacks");
  }

 private:
  std::string path_;
  AtomicFile file_;
  TraceMeta meta_;
  NativeWriterOptions options_;
  ZSTD_CCtx* cctx_;
  std::vector<Event> pending_;
  std::vector<uint8_t> raw_, compressed_;
  BlockScratch scratch_;
  LiveIds live_;
  uint64_t offset_ = 0, events_ = 0, blocks_ = 0;
  uint32_t max_stream_ = 0, max_stack_ = 0, max_pool_ = 0;
  json event_pools_ = json::array();  // [[event index, pool], ...] for events not in pool 0
};

// ---------------------------------------------------------------------------------------
// Reader.

class NativeSource final : public EventSource {
 public:
  explicit NativeSource(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw FormatError::in_file(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      ::close(fd_);
      throw FormatError::in_file(path, std::string("cannot stat: ") + std::strerror(errno));
    }
    file_size_ = static_cast<uint64_t>(st.st_size);
    dctx_ = ZSTD_createDCtx();
    try {
      if (!dctx_) throw std::runtime_error("zstd: cannot create a decompression context");
      read_header();
      read_footer_and_meta();
    } catch (...) {
      release();
      throw;
    }
  }
  ~NativeSource() override { release(); }

  const TraceMeta& meta() const override { return meta_; }

  size_t read(Event* out, size_t capacity) override {
    size_t n = 0;
    while (n < capacity) {
      if (staged_pos_ < staged_.size()) {
        size_t take = std::min(capacity - n, staged_.size() - staged_pos_);
        std::memcpy(static_cast<void*>(out + n), staged_.data() + staged_pos_, take * sizeof(Event));
        staged_pos_ += take;
        n += take;
        continue;
      }
      if (pos_ == meta_offset_) {
        finish_check();
        break;
      }
      uint32_t count = load_block();
      // Decode straight into the caller's buffer when the whole block fits (drain and the
      // replay engine ask for 64K events, one block): no staging copy.
      if (capacity - n >= count) {
        decode_loaded(out + n, count);
        n += count;
      } else {
        staged_.resize(count);
        staged_pos_ = 0;
        decode_loaded(staged_.data(), count);
      }
    }
    return n;
  }

  bool rewind() override {
    pos_ = kHeaderBytes;
    events_read_ = 0;
    next_pool_ = 0;
    blocks_read_ = 0;
    staged_.clear();
    staged_pos_ = 0;
    live_ = LiveIds();
    return true;
  }

 private:
  void release() {
    if (dctx_) ZSTD_freeDCtx(dctx_);
    dctx_ = nullptr;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  [[noreturn]] void fail(uint64_t offset, const std::string& what) const {
    throw FormatError::at_offset(path_, offset, what);
  }

  // Reads exactly `size` bytes at `offset`; every length was checked against the file size
  // before, so a short read means the file changed underneath or the disk failed.
  void pread_exact(uint64_t offset, void* buf, size_t size) const {
    auto* p = static_cast<uint8_t*>(buf);
    while (size) {
      ssize_t got = ::pread(fd_, p, size, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail(offset, std::string("read error: ") + std::strerror(errno));
      if (got == 0) fail(offset, "unexpected end of file (the file is shorter than it was when opened)");
      p += got;
      offset += static_cast<uint64_t>(got);
      size -= static_cast<size_t>(got);
    }
  }

  void read_header() {
    uint8_t h[kHeaderBytes] = {};
    size_t have = static_cast<size_t>(std::min<uint64_t>(file_size_, kHeaderBytes));
    pread_exact(0, h, have);
    if (have < 8 || std::memcmp(h, kMagic, 8) != 0) fail(0, "not a fraglab native trace (wrong magic)");
    if (have < kHeaderBytes) fail(have, "file ends inside the header (truncated)");
    uint32_t version = get_u32(h + 8);
    if (version != kNativeVersion)
      fail(8, "unsupported native format version " + std::to_string(version) + " (this build reads version " +
                  std::to_string(kNativeVersion) + ")");
    if (get_u32(h + 12) != kHeaderBytes) fail(12, "header size " + std::to_string(get_u32(h + 12)) + " is not 32");
  }

  void read_footer_and_meta() {
    uint8_t f[kFooterBytes] = {};
    if (file_size_ >= kHeaderBytes + kFooterBytes) pread_exact(file_size_ - kFooterBytes, f, kFooterBytes);
    if (file_size_ < kHeaderBytes + kFooterBytes || std::memcmp(f + 24, kEndMagic, 8) != 0) diagnose_truncation();
    uint64_t footer_at = file_size_ - kFooterBytes;
    meta_offset_ = get_u64(f);
    total_events_ = get_u64(f + 8);
    total_blocks_ = get_u64(f + 16);
    // Events decode to 40 bytes in memory from a few on disk; zstd makes a repeated block a
    // bomb (a 1 MB file of 4G events), so the count is held to the expansion budget.
    if (total_events_ > read_limits().budget(file_size_) / sizeof(Event))
      fail(file_size_ - kFooterBytes + 8, "footer counts " + std::to_string(total_events_) + " events, more than a " +
                                              std::to_string(file_size_) + "-byte file may expand to: refused as a "
                                              "decompression bomb; " + kRaiseLimitHint);
    if (meta_offset_ < kHeaderBytes || meta_offset_ > footer_at || footer_at - meta_offset_ < kSectionBytes)
      fail(footer_at, "meta offset " + std::to_string(meta_offset_) + " is past the end of the file (" +
                          std::to_string(file_size_) + " bytes)");
    uint8_t s[kSectionBytes];
    pread_exact(meta_offset_, s, sizeof s);
    if (std::memcmp(s, kMetaTag, 4) != 0) fail(meta_offset_, "no meta section where the footer points");
    uint64_t raw_size = get_u64(s + 8), compressed_size = get_u64(s + 16);
    if (compressed_size != footer_at - meta_offset_ - kSectionBytes)
      fail(meta_offset_ + 16, "meta length " + std::to_string(compressed_size) +
                                  (compressed_size > footer_at - meta_offset_ - kSectionBytes
                                       ? " runs past the end of the file"
                                       : " leaves bytes before the footer"));
    if (raw_size > kMaxMetaBytes) fail(meta_offset_ + 8, "meta size " + std::to_string(raw_size) + " is absurd");
    // A meta that claims far more than the file could need is a decompression bomb.
    if (raw_size > read_limits().budget(file_size_))
      fail(meta_offset_ + 8, "meta size " + std::to_string(raw_size) + " is more than a " + std::to_string(file_size_) +
                                 "-byte file may inflate to (" + std::to_string(read_limits().budget(file_size_)) +
                                 " bytes): refused as a decompression bomb; " + kRaiseLimitHint);
    std::vector<uint8_t> compressed(compressed_size);
    pread_exact(meta_offset_ + kSectionBytes, compressed.data(), compressed.size());
    check_frame_size(meta_offset_ + 8, meta_offset_ + kSectionBytes, compressed.data(), compressed.size(), raw_size, "meta");
    std::string text(raw_size, '\0');
    size_t n = ZSTD_decompressDCtx(dctx_, text.data(), text.size(), compressed.data(), compressed.size());
    if (ZSTD_isError(n)) fail(meta_offset_ + kSectionBytes, "meta: " + zstd_error(n));
    if (n != raw_size) fail(meta_offset_ + 8, "meta decompresses to " + std::to_string(n) + " bytes, not " + std::to_string(raw_size));
    if (uint64_t at = json_too_deep_at(text, kMaxJsonDepth); at != UINT64_MAX)
      fail(meta_offset_ + kSectionBytes, "meta: JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                                             " levels at byte " + std::to_string(at) + " of the decompressed meta");
    try {
      json j = json::parse(text);
      meta_ = meta_from_json(j);
      if (auto it = j.find("event_pools"); it != j.end())
        event_pools_ = event_pools_from_json(*it, total_events_, meta_.pools.size());
    } catch (const json::exception& e) {
      fail(meta_offset_ + kSectionBytes, std::string("meta: ") + e.what());
    } catch (const std::out_of_range& e) {
      fail(meta_offset_ + kSectionBytes, std::string("meta: ") + e.what());
    }
    meta_.format = "native";
    if (meta_.source.empty()) meta_.source = path_;
    pos_ = kHeaderBytes;
  }

  // The footer is missing: find the first block the file cuts short, so the message says
  // where the trace stops being readable.
  [[noreturn]] void diagnose_truncation() const {
    uint64_t at = kHeaderBytes;
    for (uint64_t k = 0;; ++k) {
      if (file_size_ - at < kBlockHeaderBytes) break;
      uint8_t h[kBlockHeaderBytes];
      pread_exact(at, h, sizeof h);
      if (std::memcmp(h, kBlockTag, 4) != 0) break;
      uint64_t end = at + kBlockHeaderBytes + get_u32(h + 12);
      if (end > file_size_)
        fail(at, "truncated block " + std::to_string(k) + ": its " + std::to_string(get_u32(h + 12)) +
                     " compressed bytes run past the end of the file (" + std::to_string(file_size_) + " bytes)");
      at = end;
    }
    fail(file_size_, "file ends without the footer (truncated or never finished); " + std::to_string(at) +
                         " bytes hold complete blocks");
  }

  // Reads the next block's header and compressed bytes; returns its event count.
  uint32_t load_block() {
    block_offset_ = pos_;
    if (meta_offset_ - pos_ < kBlockHeaderBytes) fail(pos_, "truncated block header before the meta section");
    uint8_t h[kBlockHeaderBytes];
    pread_exact(pos_, h, sizeof h);
    if (std::memcmp(h, kBlockTag, 4) != 0) fail(pos_, "no block where one should start (bad block tag)");
    uint32_t count = get_u32(h + 4);
    raw_size_ = get_u32(h + 8);
    uint32_t compressed_size = get_u32(h + 12);
    uint64_t first = get_u64(h + 16);
    if (count == 0 || count > kMaxBlockEvents)
      fail(pos_ + 4, "block event count " + std::to_string(count) + " out of range");
    if (count > total_events_ - events_read_)  // caught here, not after decoding them all
      fail(pos_ + 4, "block holds events past the " + std::to_string(total_events_) + " the footer counts");
    // The cheapest event takes 4 raw bytes (flags, lengths, id, time), the dearest 2 + 4 * 10 + 2 * 8.
    if (raw_size_ < kColumnTableBytes + 4ull * count || raw_size_ > kColumnTableBytes + 58ull * count)
      fail(pos_ + 8, "block raw size " + std::to_string(raw_size_) + " does not fit " + std::to_string(count) + " events");
    if (compressed_size > meta_offset_ - pos_ - kBlockHeaderBytes)
      fail(pos_ + 12, "block length " + std::to_string(compressed_size) + " runs past the end of the event section (" +
                          std::to_string(meta_offset_) + ")");
    if (first != events_read_)
      fail(pos_ + 16, "block starts at event " + std::to_string(first) + ", expected " + std::to_string(events_read_));
    compressed_.resize(compressed_size);
    pread_exact(pos_ + kBlockHeaderBytes, compressed_.data(), compressed_size);
    pos_ += kBlockHeaderBytes + compressed_size;
    return count;
  }

  // The writer's zstd frames record their content size. Comparing it with the size the section
  // header declares, before allocating, keeps a corrupt header from making the reader allocate
  // gigabytes it will never fill (found by fuzz_native).
  void check_frame_size(uint64_t size_field_offset, uint64_t frame_offset, const void* frame, size_t frame_bytes,
                        uint64_t declared, const std::string& what) const {
    unsigned long long content = ZSTD_getFrameContentSize(frame, frame_bytes);
    if (content == ZSTD_CONTENTSIZE_ERROR) fail(frame_offset, what + ": zstd: the payload has no valid frame header");
    if (content == ZSTD_CONTENTSIZE_UNKNOWN || content != declared)
      fail(size_field_offset, what + " size " + std::to_string(declared) + " disagrees with its zstd frame (" +
                                  (content == ZSTD_CONTENTSIZE_UNKNOWN ? std::string("no content size")
                                                                       : std::to_string(content) + " bytes") + ")");
  }

  void decode_loaded(Event* out, uint32_t count) {
    check_frame_size(block_offset_ + 8, block_offset_ + kBlockHeaderBytes, compressed_.data(), compressed_.size(), raw_size_,
                     "block " + std::to_string(blocks_read_) + " raw");
    raw_.resize(raw_size_ + kDecodePadding);
    size_t n = ZSTD_decompressDCtx(dctx_, raw_.data(), raw_size_, compressed_.data(), compressed_.size());
    if (ZSTD_isError(n)) fail(block_offset_ + kBlockHeaderBytes, "block " + std::to_string(blocks_read_) + ": " + zstd_error(n));
    if (n != raw_size_)
      fail(block_offset_ + 8, "block " + std::to_string(blocks_read_) + " decompresses to " + std::to_string(n) +
                                  " bytes, header says " + std::to_string(raw_size_));
    BlockLimits limits{meta_.streams.size(), meta_.stacks.size()};
    decode_block(raw_.data(), raw_size_, out, count, limits, &live_, [&](uint64_t raw_offset, const std::string& what) {
      fail(block_offset_, "block " + std::to_string(blocks_read_) + " (first event " + std::to_string(events_read_) +
                              "), decompressed byte " + std::to_string(raw_offset) + ": " + what);
    });
    for (; next_pool_ < event_pools_.size() && event_pools_[next_pool_].first < events_read_ + count; ++next_pool_)
      out[event_pools_[next_pool_].first - events_read_].pool = event_pools_[next_pool_].second;
    events_read_ += count;
    ++blocks_read_;
  }

  void finish_check() const {
    if (events_read_ != total_events_ || blocks_read_ != total_blocks_)
      fail(file_size_ - kFooterBytes + 8, "footer counts " + std::to_string(total_events_) + " events in " +
                                              std::to_string(total_blocks_) + " blocks, the file holds " +
                                              std::to_string(events_read_) + " in " + std::to_string(blocks_read_));
  }

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  ZSTD_DCtx* dctx_ = nullptr;
  TraceMeta meta_;
  uint64_t meta_offset_ = 0, total_events_ = 0, total_blocks_ = 0;
  uint64_t pos_ = kHeaderBytes, block_offset_ = 0, events_read_ = 0, blocks_read_ = 0;
  uint32_t raw_size_ = 0;
  std::vector<std::pair<uint64_t, PoolIndex>> event_pools_;  // sparse Event::pool, by event index
  size_t next_pool_ = 0;
  std::vector<uint8_t> compressed_, raw_;
  std::vector<Event> staged_;
  size_t staged_pos_ = 0;
  LiveIds live_;
};

}  // namespace

std::unique_ptr<EventSource> open_native(const std::string& path) { return std::make_unique<NativeSource>(path); }

std::unique_ptr<NativeWriter> create_native_writer(const std::string& path, const TraceMeta& meta,
                                                   const NativeWriterOptions& options) {
  return std::make_unique<NativeWriterImpl>(path, meta, options);
}

}  // namespace fraglab
