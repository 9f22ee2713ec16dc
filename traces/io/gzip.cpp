#include "traces/io/gzip.h"

#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "traces/io/atomic_file.h"
#include "traces/io/format_error.h"
#include "traces/io/read_limits.h"
#include "traces/populate_pages.h"

namespace fraglab {

namespace {

// The trailer's ISIZE is the last member's size modulo 2^32: a size past the budget is a bomb, or the
// trailer of a damaged file. Either way the data is inflated into a small scratch buffer first, only
// counted: a bomb is refused without holding the budget's bytes (a 45 MB bomb held 2.8 GB before its
// refusal), a damaged file goes on to the reading that words its damage.
void refuse_by_trailer(std::string_view compressed, const std::string& name) {
  if (compressed.size() < 18 || static_cast<unsigned char>(compressed[0]) != 0x1f ||
      static_cast<unsigned char>(compressed[1]) != 0x8b)
    return;
  uint32_t isize = 0;
  std::memcpy(&isize, compressed.data() + compressed.size() - 4, sizeof isize);
  const uint64_t limit = read_limits().budget(compressed.size());
  if (isize <= limit) return;
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return;
  std::vector<unsigned char> scratch(1 << 18);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  size_t in_left = compressed.size();
  uint64_t produced = 0;
  for (;;) {
    uInt in_chunk = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
    zs.avail_in = in_chunk;
    zs.next_out = scratch.data();
    zs.avail_out = static_cast<uInt>(scratch.size());
    int rc = inflate(&zs, Z_NO_FLUSH);
    in_left -= in_chunk - zs.avail_in;
    produced += scratch.size() - zs.avail_out;
    if (produced > limit) {
      inflateEnd(&zs);
      throw FormatError::at_offset(name, compressed.size() - in_left,
                                   "gzip data inflates past " + std::to_string(limit) + " bytes (" +
                                       std::to_string(compressed.size()) +
                                       " compressed): refused as a decompression bomb; " + kRaiseLimitHint);
    }
    if (rc == Z_STREAM_END) {
      if (in_left < 2) break;
      inflateReset(&zs);
      continue;
    }
    if (rc != Z_OK) break;  // damaged: worded by the reading itself
  }
  inflateEnd(&zs);
}

}  // namespace

std::string gunzip(std::string_view compressed, const std::string& name) {
  refuse_by_trailer(compressed, name);
  // A decompression bomb (gzip reaches ~1000x) stops at the limit, before it is in memory.
  const uint64_t limit = read_limits().budget(compressed.size());
  std::string out;
  out.resize(std::min<uint64_t>(std::max<size_t>(compressed.size() * 4, 1 << 16), limit));
  z_stream zs{};
  // 16 + MAX_WBITS: gzip wrapper only.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw FormatError::in_file(name, "zlib initialisation failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  size_t in_left = compressed.size();
  size_t produced = 0;
  int rc = Z_OK;
  for (;;) {
    if (produced == out.size()) {
      if (produced >= limit) {
        uint64_t offset = compressed.size() - in_left;
        inflateEnd(&zs);
        throw FormatError::at_offset(name, offset,
                                     "gzip data inflates past " + std::to_string(limit) + " bytes (" +
                                         std::to_string(compressed.size()) +
                                         " compressed): refused as a decompression bomb; " + kRaiseLimitHint);
      }
      out.resize(std::min<uint64_t>(out.size() * 2, limit));
    }
    uInt in_chunk = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
    zs.avail_in = in_chunk;
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    uInt out_chunk = static_cast<uInt>(std::min<size_t>(out.size() - produced, 1u << 30));
    zs.avail_out = out_chunk;
    rc = inflate(&zs, Z_NO_FLUSH);
    in_left -= in_chunk - zs.avail_in;
    produced += out_chunk - zs.avail_out;
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members are one file (gzip(1) semantics).
      if (in_left == 0) break;
      size_t offset = compressed.size() - in_left;
      if (in_left < 2 || static_cast<unsigned char>(compressed[offset]) != 0x1f) {
        inflateEnd(&zs);
        throw FormatError::at_offset(name, offset, "trailing garbage after gzip data");
      }
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_BUF_ERROR && in_left == 0 && zs.avail_out != 0) {
      uint64_t offset = compressed.size();
      inflateEnd(&zs);
      throw FormatError::at_offset(name, offset, "gzip data is truncated (ends before the end of the stream)");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      uint64_t offset = compressed.size() - in_left;
      std::string msg = zs.msg ? zs.msg : "corrupt data";
      inflateEnd(&zs);
      throw FormatError::at_offset(name, offset, "gzip: " + msg);
    }
  }
  inflateEnd(&zs);
  out.resize(produced);
  return out;
}

namespace {

// One gzip member whose trailer states its size: inflated by libdeflate, or nothing (the caller
// falls back to zlib, which handles and reports every other case).
std::optional<InflatedBytes> inflate_one_member(std::string_view compressed) {
  if (compressed.size() < 18) return std::nullopt;
  uint32_t isize = 0;  // the trailer's size of the input, modulo 2^32
  std::memcpy(&isize, compressed.data() + compressed.size() - 4, sizeof isize);
  // A size over the expansion budget is a bomb to refuse (zlib says where); a file of 4 GiB or more
  // states its size modulo 2^32, and libdeflate then reports a short buffer: zlib again.
  if (isize == 0 || isize > read_limits().budget(compressed.size())) return std::nullopt;
  void* map = mmap(nullptr, isize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (map == MAP_FAILED) return std::nullopt;
  InflatedBytes out(map, isize, isize);
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  if (!d) return std::nullopt;
  size_t in_used = 0, out_size = 0;
  libdeflate_result r =
      libdeflate_gzip_decompress_ex(d, compressed.data(), compressed.size(), map, isize, &in_used, &out_size);
  libdeflate_free_decompressor(d);
  if (r != LIBDEFLATE_SUCCESS || in_used != compressed.size() || out_size != isize) return std::nullopt;
  return out;
}

}  // namespace

InflatedBytes::~InflatedBytes() {
  if (map_) munmap(map_, map_size_);
}

InflatedBytes inflate_gzip(std::string_view compressed, const std::string& name) {
  if (std::optional<InflatedBytes> out = inflate_one_member(compressed)) return std::move(*out);
  return InflatedBytes(gunzip(compressed, name));
}

std::unique_ptr<InflatingBytes> InflatingBytes::start(std::string_view compressed, bool file_mapping) {
  if (compressed.size() < 18) return nullptr;
  uint32_t isize = 0;
  std::memcpy(&isize, compressed.data() + compressed.size() - 4, sizeof isize);
  if (isize == 0 || isize > read_limits().budget(compressed.size())) return nullptr;
  // Not populated: the inflating thread takes the page faults, on its own core.
  void* map = mmap(nullptr, isize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return nullptr;
  return std::unique_ptr<InflatingBytes>(new InflatingBytes(compressed, map, isize, file_mapping));
}

InflatingBytes::InflatingBytes(std::string_view compressed, void* map, size_t size, bool file_mapping)
    : compressed_(compressed), file_mapping_(file_mapping), map_(map), size_(size) {
  thread_ = std::thread([this] { run(); });
}

InflatingBytes::~InflatingBytes() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  munmap(map_, size_);
}

namespace {

// The length of a gzip member's header (RFC 1952), or 0 where it is not one this path reads.
size_t gzip_header_size(std::string_view in) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(in[i]); };
  if (in.size() < 18 || byte(0) != 0x1f || byte(1) != 0x8b || byte(2) != 8 || (byte(3) & 0xe0)) return 0;
  const unsigned flags = byte(3);
  size_t at = 10;
  if (flags & 4) {  // FEXTRA
    if (at + 2 > in.size()) return 0;
    at += 2 + (byte(at) | size_t{byte(at + 1)} << 8);
  }
  for (unsigned flag : {8u, 16u}) {  // FNAME, FCOMMENT: zero-terminated
    if (!(flags & flag)) continue;
    while (at < in.size() && in[at] != '\0') ++at;
    ++at;
  }
  if (flags & 2) at += 2;  // FHCRC
  return at + 8 <= in.size() ? at : 0;
}

uint32_t load_le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

// Raw deflate after the header, inflated by ISA-L (Intel's igzip), which also computes the trailer's CRC and
// reads the trailer as the bytes come out. zlib's streaming inflate took 110 ms of CPU for a 172 MB snapshot
// pickle where igzip takes 40 ms (both into memory already faulted in): on two cores the inflater shares the
// machine with the parse, so that time was the import's. libdeflate is as fast but works in one call only.
void InflatingBytes::run() {
  auto give_up = [&] {
    ready_.store(kFailed, std::memory_order_release);
    ready_.notify_all();
  };
  const size_t header = gzip_header_size(compressed_);
  if (header == 0) return give_up();
  inflate_state st;
  isal_inflate_init(&st);
  st.crc_flag = ISAL_GZIP_NO_HDR_VER;  // the header is read above; the trailer's CRC and size are checked
  st.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(compressed_.data() + header));
  size_t in_left = compressed_.size() - header;  // not yet given to igzip
  size_t produced = 0;
  // Published a MiB at a time: often enough for the reader never to wait long, rarely enough
  // that the wake-ups cost nothing.
  constexpr size_t kStep = size_t{1} << 20;
  PopulateAhead pages(map_, size_);
  for (;;) {
    if (stop_.load(std::memory_order_relaxed)) return give_up();
    if (st.avail_in == 0) {  // avail_in is 32 bits: a file past 4 GiB is given in parts
      st.avail_in = static_cast<uint32_t>(std::min<size_t>(in_left, 1u << 30));
      in_left -= st.avail_in;
    }
    const uint32_t in_before = st.avail_in;
    st.next_out = static_cast<uint8_t*>(map_) + produced;
    const auto out_chunk = static_cast<uint32_t>(std::min(size_ - produced, kStep));
    st.avail_out = out_chunk;
    pages.before_writing(produced + out_chunk);
    const int rc = isal_inflate(&st);
    const size_t made = out_chunk - st.avail_out;
    produced += made;
    if (rc != ISAL_DECOMP_OK) return give_up();  // damaged, or a trailer that does not match
    if (st.block_state == ISAL_BLOCK_FINISH) {
      // One member, exactly the stated size and checksum, nothing after it: else the one-shot path decides.
      const char* trailer = compressed_.data() + compressed_.size() - 8;
      if (st.avail_in != 0 || in_left != 0 || produced != size_ || load_le32(trailer) != st.crc) return give_up();
      ready_.store(produced, std::memory_order_release);
      ready_.notify_all();
      done_ = true;
      return;
    }
    // No progress: the input ended early, or there is more output than the trailer states.
    if (made == 0 && st.avail_in == in_before) return give_up();
    ready_.store(produced, std::memory_order_release);
    ready_.notify_all();
    drop_input(compressed_.size() - in_left - st.avail_in);
  }
}

// The compressed pages behind the inflater are not needed again (a fallback reads them back from
// the file): the file stays in memory only while it is being inflated, as with inflating first.
void InflatingBytes::drop_input(size_t consumed) {
  static const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (!file_mapping_) return;
  size_t upto = consumed / page * page;
  if (upto < dropped_ + (size_t{8} << 20)) return;  // a few calls, not one a MiB
  madvise(const_cast<char*>(compressed_.data()) + dropped_, upto - dropped_, MADV_DONTNEED);
  dropped_ = upto;
}

size_t InflatingBytes::wait_beyond(size_t have) {
  for (;;) {
    size_t r = ready_.load(std::memory_order_acquire);
    if (r == kFailed) throw InflateAbandoned{};
    if (r > have || r == size_) return r;
    ready_.wait(r, std::memory_order_acquire);
  }
}

void InflatingBytes::finish() {
  while (wait_beyond(size_) < size_) {
  }
  // All bytes are out once the stream ended well (the producer publishes the last of them then).
  if (thread_.joinable()) thread_.join();
  if (!done_) throw InflateAbandoned{};
}

std::string gunzip_prefix(std::string_view compressed, size_t max_out) {
  std::string out(max_out, '\0');
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return {};
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(std::min<size_t>(compressed.size(), 1u << 30));
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(std::min<size_t>(max_out, 1u << 30));
  inflate(&zs, Z_SYNC_FLUSH);  // whatever the outcome, zs.total_out bytes are good
  out.resize(zs.total_out);
  inflateEnd(&zs);
  return out;
}

std::string read_maybe_gzipped(const std::string& path) {
  std::string bytes = read_file(path);
  return is_gzip(bytes) ? gunzip(bytes, path) : bytes;
}

}  // namespace fraglab
