// The native trace format's reader: the footer and meta first, then one block at a time,
// checked as it is decoded (native_codec.cpp), so any length streams in bounded memory (layout
// in native_format.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "traces/formats/native/native_format.h"
#include "traces/formats/native/native_format_detail.h"
#include "traces/io/format_error.h"
#include "traces/io/json_depth.h"
#include "traces/io/read_limits.h"

namespace fraglab {

using json = nlohmann::json;
using namespace native_detail;

namespace {

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
    next_context_ = 0;
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
                                              std::to_string(file_size_) +
                                              "-byte file may expand to: refused as a "
                                              "decompression bomb; " +
                                              kRaiseLimitHint);
    if (meta_offset_ < kHeaderBytes || meta_offset_ > footer_at || footer_at - meta_offset_ < kSectionBytes)
      fail(footer_at, "meta offset " + std::to_string(meta_offset_) + " is past the end of the file (" +
                          std::to_string(file_size_) + " bytes)");
    uint8_t s[kSectionBytes];
    pread_exact(meta_offset_, s, sizeof s);
    if (std::memcmp(s, kMetaTag, 4) != 0) fail(meta_offset_, "no meta section where the footer points");
    uint64_t raw_size = get_u64(s + 8), compressed_size = get_u64(s + 16);
    if (compressed_size != footer_at - meta_offset_ - kSectionBytes)
      fail(meta_offset_ + 16,
           "meta length " + std::to_string(compressed_size) +
               (compressed_size > footer_at - meta_offset_ - kSectionBytes ? " runs past the end of the file"
                                                                           : " leaves bytes before the footer"));
    if (raw_size > kMaxMetaBytes) fail(meta_offset_ + 8, "meta size " + std::to_string(raw_size) + " is absurd");
    // A meta that claims far more than the file could need is a decompression bomb.
    if (raw_size > read_limits().budget(file_size_))
      fail(meta_offset_ + 8, "meta size " + std::to_string(raw_size) + " is more than a " + std::to_string(file_size_) +
                                 "-byte file may inflate to (" + std::to_string(read_limits().budget(file_size_)) +
                                 " bytes): refused as a decompression bomb; " + kRaiseLimitHint);
    std::vector<uint8_t> compressed(compressed_size);
    pread_exact(meta_offset_ + kSectionBytes, compressed.data(), compressed.size());
    check_frame_size(meta_offset_ + 8, meta_offset_ + kSectionBytes, compressed.data(), compressed.size(), raw_size,
                     "meta");
    std::string text(raw_size, '\0');
    size_t n = ZSTD_decompressDCtx(dctx_, text.data(), text.size(), compressed.data(), compressed.size());
    if (ZSTD_isError(n)) fail(meta_offset_ + kSectionBytes, "meta: " + zstd_error(n));
    if (n != raw_size)
      fail(meta_offset_ + 8, "meta decompresses to " + std::to_string(n) + " bytes, not " + std::to_string(raw_size));
    if (uint64_t at = json_too_deep_at(text, kMaxJsonDepth); at != UINT64_MAX)
      fail(meta_offset_ + kSectionBytes, "meta: JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                                             " levels at byte " + std::to_string(at) + " of the decompressed meta");
    try {
      json j = json::parse(text);
      meta_ = meta_from_json(j);
      if (auto it = j.find("event_pools"); it != j.end())
        event_pools_ = event_pools_from_json(*it, total_events_, meta_.pools.size());
      if (auto it = j.find("event_compile_contexts"); it != j.end())
        event_contexts_ = event_contexts_from_json(*it, total_events_, meta_.compile_contexts.size());
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
      fail(pos_ + 8,
           "block raw size " + std::to_string(raw_size_) + " does not fit " + std::to_string(count) + " events");
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
                                                                       : std::to_string(content) + " bytes") +
                                  ")");
  }

  void decode_loaded(Event* out, uint32_t count) {
    check_frame_size(block_offset_ + 8, block_offset_ + kBlockHeaderBytes, compressed_.data(), compressed_.size(),
                     raw_size_, "block " + std::to_string(blocks_read_) + " raw");
    raw_.resize(raw_size_ + kDecodePadding);
    size_t n = ZSTD_decompressDCtx(dctx_, raw_.data(), raw_size_, compressed_.data(), compressed_.size());
    if (ZSTD_isError(n))
      fail(block_offset_ + kBlockHeaderBytes, "block " + std::to_string(blocks_read_) + ": " + zstd_error(n));
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
    for (; next_context_ < event_contexts_.size() && event_contexts_[next_context_].first < events_read_ + count;
         ++next_context_)
      out[event_contexts_[next_context_].first - events_read_].compile_context = event_contexts_[next_context_].second;
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
  std::vector<std::pair<uint64_t, PoolIndex>> event_pools_;        // sparse Event::pool, by event index
  std::vector<std::pair<uint64_t, ContextIndex>> event_contexts_;  // sparse Event::compile_context
  size_t next_pool_ = 0, next_context_ = 0;
  std::vector<uint8_t> compressed_, raw_;
  std::vector<Event> staged_;
  size_t staged_pos_ = 0;
  LiveIds live_;
};

}  // namespace

std::unique_ptr<EventSource> open_native(const std::string& path) { return std::make_unique<NativeSource>(path); }

}  // namespace fraglab
