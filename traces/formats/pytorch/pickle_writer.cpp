#include "traces/formats/pytorch/pickle_writer.h"

#include <zlib.h>

#include <cstring>
#include <stdexcept>

#include "traces/io/atomic_file.h"

namespace fraglab {

namespace {
constexpr uint32_t kBatch = 1000;  // CPython's pickler batch size for APPENDS/SETITEMS
constexpr size_t kFlushAt = 1 << 20;
}  // namespace

struct PickleWriter::Deflate {
  z_stream zs{};
  Deflate() {
    if (deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("zlib: deflateInit2 failed");
  }
  ~Deflate() { deflateEnd(&zs); }
};

PickleWriter::PickleWriter(AtomicFile& out, bool gzip) : out_(out), gzip_(gzip) {
  if (gzip_) deflate_ = std::make_unique<Deflate>();
  buf_.reserve(kFlushAt + 4096);
  const uint8_t proto[2] = {0x80, 4};
  put(proto, 2);
}

PickleWriter::~PickleWriter() = default;

void PickleWriter::put(const void* p, size_t n) {
  buf_.append(static_cast<const char*>(p), n);
  if (buf_.size() >= kFlushAt) flush(false);
}

void PickleWriter::flush(bool final) {
  if (!gzip_) {
    out_.write(buf_);
    buf_.clear();
    return;
  }
  z_stream& zs = deflate_->zs;
  zs.next_in = reinterpret_cast<Bytef*>(buf_.data());
  zs.avail_in = static_cast<uInt>(buf_.size());
  char chunk[1 << 16];
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof chunk;
    rc = deflate(&zs, final ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) throw std::runtime_error("zlib: deflate failed");
    out_.write(chunk, sizeof chunk - zs.avail_out);
  } while (zs.avail_out == 0 || (final && rc != Z_STREAM_END));
  buf_.clear();
}

// Counts an item into the innermost container; a full batch is flushed into it.
void PickleWriter::item_done() {
  if (levels_.empty()) return;
  Level& l = levels_.back();
  if (l.kind == 't') return;
  uint32_t per_batch = l.kind == 'd' ? 2 * kBatch : kBatch;
  if (++l.batch == per_batch) {
    op(l.kind == 'd' ? 'u' : 'e');  // SETITEMS / APPENDS
    op('(');
    l.batch = 0;
  }
}

void PickleWriter::none() {
  op('N');
  item_done();
}

void PickleWriter::boolean(bool v) {
  op(v ? 0x88 : 0x89);
  item_done();
}

void PickleWriter::integer(int64_t v) {
  if (v >= 0 && v < 256) {
    uint8_t b[2] = {'K', static_cast<uint8_t>(v)};
    put(b, 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    uint8_t b[5] = {'J'};
    auto x = static_cast<int32_t>(v);
    std::memcpy(b + 1, &x, 4);
    put(b, 5);
  } else {
    // LONG1: the shortest little-endian two's complement that keeps the sign.
    uint8_t b[10] = {0x8a, 0};
    auto u = static_cast<uint64_t>(v);
    std::memcpy(b + 2, &u, 8);
    uint8_t n = 8;
    while (n > 1 && ((b[1 + n] == 0x00 && !(b[n] & 0x80)) || (b[1 + n] == 0xff && (b[n] & 0x80)))) --n;
    b[1] = n;
    put(b, 2 + n);
  }
  item_done();
}

void PickleWriter::floating(double v) {
  uint8_t b[9] = {'G'};
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  for (int i = 0; i < 8; ++i) b[1 + i] = static_cast<uint8_t>(bits >> (56 - 8 * i));  // big-endian
  put(b, 9);
  item_done();
}

void PickleWriter::str(std::string_view s) {
  if (s.size() < 256) {
    uint8_t h[2] = {0x8c, static_cast<uint8_t>(s.size())};
    put(h, 2);
  } else {
    uint8_t h[9] = {0x8d};
    uint64_t n = s.size();
    std::memcpy(h + 1, &n, 8);
    put(h, 9);
  }
  put(s.data(), s.size());
  item_done();
}

void PickleWriter::interned(std::string_view s) {
  auto it = strings_.find(std::string(s));
  if (it != strings_.end()) return recall(it->second);
  str(s);
  op(0x94);  // MEMOIZE: the string just written, still on the stack
  strings_.emplace(std::string(s), memo_next_++);
}

uint32_t PickleWriter::begin(uint8_t empty_op, char kind, bool remember) {
  op(empty_op);
  uint32_t handle = UINT32_MAX;
  if (remember) {
    op(0x94);  // MEMOIZE the new container (later recall()s refer to this very object)
    handle = memo_next_++;
  }
  op('(');
  levels_.push_back({kind});
  return handle;
}

uint32_t PickleWriter::begin_list(bool remember) { return begin(']', 'l', remember); }
uint32_t PickleWriter::begin_dict(bool remember) { return begin('}', 'd', remember); }

void PickleWriter::begin_tuple() {
  op('(');
  levels_.push_back({'t'});
}

void PickleWriter::end() {
  if (levels_.empty()) throw std::logic_error("PickleWriter::end without an open container");
  char kind = levels_.back().kind;
  levels_.pop_back();
  op(kind == 'd' ? 'u' : kind == 'l' ? 'e' : 't');
  item_done();
}

void PickleWriter::recall(uint32_t handle) {
  if (handle < 256) {
    uint8_t b[2] = {'h', static_cast<uint8_t>(handle)};
    put(b, 2);
  } else {
    uint8_t b[5] = {'j'};
    std::memcpy(b + 1, &handle, 4);
    put(b, 5);
  }
  item_done();
}

void PickleWriter::finish() {
  if (!levels_.empty()) throw std::logic_error("PickleWriter::finish with open containers");
  op('.');
  flush(true);
}

}  // namespace fraglab
