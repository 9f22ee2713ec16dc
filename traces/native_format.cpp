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

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "traces/atomic_file.h"
#include "traces/format_error.h"
#include "traces/native_format_detail.h"

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

enum class VarintStatus { Ok, Truncated, Overlong };

// One LEB128 varint from [p, end). The one-byte case is by far the most common (ids, small
// deltas, stream and stack indices), so it is tested first.
inline VarintStatus get_varint(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  if (p < end && *p < 0x80) [[likely]] {
    v = *p++;
    return VarintStatus::Ok;
  }
  uint64_t r = 0;
  for (int shift = 0;; shift += 7) {
    if (p == end) return VarintStatus::Truncated;
    uint8_t b = *p++;
    if (shift == 63 && b > 1) return VarintStatus::Overlong;  // bits beyond 64 or an 11th byte
    r |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  v = r;
  return VarintStatus::Ok;
}

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

void encode_block(const Event* events, size_t count, std::vector<uint8_t>& raw, BlockScratch& scratch) {
  for (auto& c : scratch.columns) c.resize(count * 10);
  uint8_t* col[kColumns];
  for (int c = 0; c < kColumns; ++c) col[c] = scratch.columns[c].data();
  raw.resize(kColumnTableBytes + count);
  uint8_t* flags = raw.data() + kColumnTableBytes;
  int64_t prev_time = 0;
  uint64_t prev_addr = 0;
  for (size_t i = 0; i < count; ++i) {
    const Event& e = events[i];
    uint8_t f = static_cast<uint8_t>(e.kind);
    col[kId] = put_varint(col[kId], e.id);
    col[kTime] = put_varint(col[kTime], zigzag(static_cast<int64_t>(static_cast<uint64_t>(e.time_us) -
                                                                    static_cast<uint64_t>(prev_time))));
    prev_time = e.time_us;
    if (e.size) f |= kHasSize, col[kSize] = put_varint(col[kSize], e.size);
    if (e.addr) {
      f |= kHasAddr;
      col[kAddr] = put_varint(col[kAddr], zigzag(static_cast<int64_t>(e.addr - prev_addr)));
      prev_addr = e.addr;
    }
    if (e.stream) f |= kHasStream, col[kStream] = put_varint(col[kStream], e.stream);
    if (e.stack) f |= kHasStack, col[kStack] = put_varint(col[kStack], e.stack);
    flags[i] = f;
  }
  for (int c = 0; c < kColumns; ++c) {
    size_t len = static_cast<size_t>(col[c] - scratch.columns[c].data());
    put_u32(raw.data() + 4 * c, static_cast<uint32_t>(len));
    raw.insert(raw.end(), scratch.columns[c].data(), col[c]);
  }
}

namespace {

constexpr const char* kColumnNames[kColumns] = {"id", "time", "size", "addr", "stream", "stack"};

// Decodes one varint column into a field of `events`. `Present` says whether event i has a
// value in this column; `Store` puts the decoded value into the event. A column must hold
// exactly the values its events need.
template <typename Present, typename Store>
const char* decode_column(const uint8_t* p, const uint8_t* end, Event* events, size_t count, Present present,
                          Store store, size_t& bad_event) {
  for (size_t i = 0; i < count; ++i) {
    if (!present(i)) continue;
    uint64_t v;
    VarintStatus s = get_varint(p, end, v);
    if (s != VarintStatus::Ok) [[unlikely]] {
      bad_event = i;
      return s == VarintStatus::Truncated ? "column ends inside a varint" : "corrupt varint (more than 64 bits)";
    }
    if (const char* err = store(events[i], v)) [[unlikely]] {
      bad_event = i;
      return err;
    }
  }
  if (p != end) {
    bad_event = count;
    return "column holds bytes beyond its last value";
  }
  return nullptr;
}

}  // namespace

void decode_block(const uint8_t* raw, size_t raw_size, Event* events, size_t count, const BlockLimits& limits,
                  const BlockErrorFn& on_error) {
  auto fail = [&on_error](uint64_t raw_offset, const std::string& what) {
    on_error(raw_offset, what);
    throw std::logic_error("native block error handler returned");  // it must throw
  };
  if (raw_size < kColumnTableBytes + count) fail(0, "block is shorter than its flags column");
  const uint8_t* flags = raw + kColumnTableBytes;
  const uint8_t* begin[kColumns];
  const uint8_t* end[kColumns];
  size_t at = kColumnTableBytes + count;
  for (int c = 0; c < kColumns; ++c) {
    uint64_t len = get_u32(raw + 4 * c);
    if (len > raw_size - at) fail(4 * static_cast<uint64_t>(c), std::string(kColumnNames[c]) + " column length " +
                                                                      std::to_string(len) + " runs past the block");
    begin[c] = raw + at;
    at += len;
    end[c] = raw + at;
  }
  if (at != raw_size) fail(at, "block has " + std::to_string(raw_size - at) + " bytes after its last column");

  for (size_t i = 0; i < count; ++i) {
    uint8_t kind = flags[i] & kKindMask;
    if (kind >= kEventKindCount) [[unlikely]]
      fail(kColumnTableBytes + i, "event " + std::to_string(i) + " has unknown kind " + std::to_string(kind));
    events[i] = Event{};
    events[i].kind = static_cast<EventKind>(kind);
  }

  size_t bad = 0;
  auto check = [&](int c, const char* err) {
    if (err) [[unlikely]]
      fail(static_cast<uint64_t>(begin[c] - raw),
           std::string(kColumnNames[c]) + " column, event " + std::to_string(bad) + ": " + err);
  };
  auto all = [](size_t) { return true; };
  auto has = [flags](uint8_t bit) { return [flags, bit](size_t i) { return (flags[i] & bit) != 0; }; };

  check(kId, decode_column(begin[kId], end[kId], events, count, all, [](Event& e, uint64_t v) -> const char* {
          if (v > UINT32_MAX) return "id does not fit 32 bits";
          e.id = static_cast<AllocId>(v);
          return nullptr;
        }, bad));
  int64_t time = 0;
  check(kTime, decode_column(begin[kTime], end[kTime], events, count, all, [&time](Event& e, uint64_t v) -> const char* {
          time = static_cast<int64_t>(static_cast<uint64_t>(time) + static_cast<uint64_t>(unzigzag(v)));
          e.time_us = time;
          return nullptr;
        }, bad));
  check(kSize, decode_column(begin[kSize], end[kSize], events, count, has(kHasSize), [](Event& e, uint64_t v) -> const char* {
          e.size = v;
          return nullptr;
        }, bad));
  uint64_t addr = 0;
  check(kAddr, decode_column(begin[kAddr], end[kAddr], events, count, has(kHasAddr), [&addr](Event& e, uint64_t v) -> const char* {
          addr += static_cast<uint64_t>(unzigzag(v));
          e.addr = addr;
          return nullptr;
        }, bad));
  check(kStream, decode_column(begin[kStream], end[kStream], events, count, has(kHasStream),
                               [&limits](Event& e, uint64_t v) -> const char* {
                                 if (v >= limits.streams) return "stream index not in the trace's stream table";
                                 e.stream = static_cast<StreamIndex>(v);
                                 return nullptr;
                               }, bad));
  check(kStack, decode_column(begin[kStack], end[kStack], events, count, has(kHasStack),
                              [&limits](Event& e, uint64_t v) -> const char* {
                                if (v >= limits.stacks) return "stack id not in the trace's stack table";
                                e.stack = static_cast<StackId>(v);
                                return nullptr;
                              }, bad));
}

const char* LiveIds::apply(const Event& e) {
  switch (e.kind) {
    case EventKind::Alloc:
      if (e.id < live_.size()) {
        if (live_[e.id]) return "alloc of an id that is already live";
        live_[e.id] = 1;
      } else if (e.id == live_.size()) {
        live_.push_back(1);
      } else {
        return "alloc id skips past the dense id range";
      }
      return nullptr;
    case EventKind::Free:
      if (e.id >= live_.size() || !live_[e.id]) return "free of an id that is not live";
      live_[e.id] = 0;
      return nullptr;
    case EventKind::FreeRequested:
      if (e.id >= live_.size() || !live_[e.id]) return "free_requested of an id that is not live";
      return nullptr;
    default:
      return nullptr;
  }
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
          {"dropped_unknown_frees", m.dropped_unknown_frees}};
}

// Throws nlohmann::json exceptions on a wrong shape; the caller turns them into FormatError.
TraceMeta meta_from_json(const json& j) {
  TraceMeta m;
  m.source = j.at("source").get<std::string>();
  m.format = j.at("format").get<std::string>();
  m.device = j.at("device").get<int>();
  m.streams = j.at("streams").get<std::vector<uint64_t>>();
  m.allocator_settings = j.at("allocator_settings").get<std::map<std::string, std::string>>();
  m.stacks.clear();
  for (const auto& s : j.at("stacks")) {
    std::vector<StackFrame> frames;
    for (const auto& f : s) frames.push_back({f.at(0).get<std::string>(), f.at(1).get<std::string>(), f.at(2).get<int64_t>()});
    m.stacks.push_back(std::move(frames));
  }
  m.dropped_unknown_frees = j.at("dropped_unknown_frees").get<uint64_t>();
  if (m.streams.empty() || m.streams.size() > 65536) throw std::out_of_range("stream table must hold 1 to 65536 streams");
  if (m.stacks.empty() || !m.stacks[0].empty()) throw std::out_of_range("stack table must start with the empty stack");
  return m;
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
      pending_.push_back(events[i]);
      if (pending_.size() == options_.block_events) flush_block();
    }
  }

  void finish() override {
    validate_meta();
    if (!pending_.empty()) flush_block();
    std::string text = meta_to_json(meta_).dump();
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
    // Streams and stacks may still be interned later (set_meta), so only the
    // 16-bit stream index range is checked here; finish() checks against the final meta.
    if (e.stream > max_stream_) max_stream_ = e.stream;
    if (e.stack > max_stack_) max_stack_ = e.stack;
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
    if (max_stream_ >= meta_.streams.size())
      throw std::invalid_argument("native writer (" + path_ + "): events use stream index " +
                                  std::to_string(max_stream_) + " but the meta has " +
                                  std::to_string(meta_.streams.size()) + " streams");
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
  uint32_t max_stream_ = 0, max_stack_ = 0;
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
    std::vector<uint8_t> compressed(compressed_size);
    pread_exact(meta_offset_ + kSectionBytes, compressed.data(), compressed.size());
    std::string text(raw_size, '\0');
    size_t n = ZSTD_decompressDCtx(dctx_, text.data(), text.size(), compressed.data(), compressed.size());
    if (ZSTD_isError(n)) fail(meta_offset_ + kSectionBytes, "meta: " + zstd_error(n));
    if (n != raw_size) fail(meta_offset_ + 8, "meta decompresses to " + std::to_string(n) + " bytes, not " + std::to_string(raw_size));
    try {
      meta_ = meta_from_json(json::parse(text));
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
    // The cheapest event takes 3 raw bytes (flags, id, time), the dearest 1 + 6 * 10.
    if (raw_size_ < kColumnTableBytes + 3ull * count || raw_size_ > kColumnTableBytes + 61ull * count)
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

  void decode_loaded(Event* out, uint32_t count) {
    raw_.resize(raw_size_);
    size_t n = ZSTD_decompressDCtx(dctx_, raw_.data(), raw_.size(), compressed_.data(), compressed_.size());
    if (ZSTD_isError(n)) fail(block_offset_ + kBlockHeaderBytes, "block " + std::to_string(blocks_read_) + ": " + zstd_error(n));
    if (n != raw_size_)
      fail(block_offset_ + 8, "block " + std::to_string(blocks_read_) + " decompresses to " + std::to_string(n) +
                                  " bytes, header says " + std::to_string(raw_size_));
    BlockLimits limits{meta_.streams.size(), meta_.stacks.size()};
    decode_block(raw_.data(), raw_.size(), out, count, limits, [&](uint64_t raw_offset, const std::string& what) {
      fail(block_offset_, "block " + std::to_string(blocks_read_) + ", decompressed byte " + std::to_string(raw_offset) +
                              ": " + what);
    });
    for (uint32_t i = 0; i < count; ++i) {
      if (const char* err = live_.apply(out[i])) [[unlikely]]
        fail(block_offset_, "block " + std::to_string(blocks_read_) + ", event " + std::to_string(events_read_ + i) +
                                ": " + err + " (id " + std::to_string(out[i].id) + ")");
    }
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
