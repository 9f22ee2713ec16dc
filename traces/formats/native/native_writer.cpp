// The native trace format's writer: events in blocks of column bytes (native_codec.cpp), each
// a zstd frame, then the meta and the footer (layout in native_format.h).
#include <zstd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "traces/formats/native/native_format.h"
#include "traces/formats/native/native_format_detail.h"
#include "traces/io/atomic_file.h"
#include "traces/io/format_error.h"
#include "traces/io/read_limits.h"

namespace fraglab {

using json = nlohmann::json;
using namespace native_detail;

namespace {

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
      if (events[i].compile_context)
        event_contexts_.push_back(json::array({events_ + pending_.size(), events[i].compile_context}));
      pending_.push_back(events[i]);
      if (pending_.size() == options_.block_events) flush_block();
    }
  }

  void finish() override {
    validate_meta();
    if (!pending_.empty()) flush_block();
    json meta = meta_to_json(meta_);
    if (!event_pools_.empty()) meta["event_pools"] = std::move(event_pools_);
    if (!event_contexts_.empty()) meta["event_compile_contexts"] = std::move(event_contexts_);
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
    if (e.compile_context > max_context_) max_context_ = e.compile_context;
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
    if (max_context_ > meta_.compile_contexts.size())
      throw std::invalid_argument("native writer (" + path_ + "): events use compile context " +
                                  std::to_string(max_context_) + " but the meta has " +
                                  std::to_string(meta_.compile_contexts.size()));
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
  uint32_t max_stream_ = 0, max_stack_ = 0, max_pool_ = 0, max_context_ = 0;
  json event_pools_ = json::array();     // [[event index, pool], ...] for events not in pool 0
  json event_contexts_ = json::array();  // [[event index, compile context], ...] for events with one
};

}  // namespace

std::unique_ptr<NativeWriter> create_native_writer(const std::string& path, const TraceMeta& meta,
                                                   const NativeWriterOptions& options) {
  return std::make_unique<NativeWriterImpl>(path, meta, options);
}

}  // namespace fraglab
