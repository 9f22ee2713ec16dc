// gzip decompression, with errors that say where the stream broke. A single-member file whose
// size the trailer gives inflates with libdeflate in one call (about 3.4x zlib's speed: 231 MB of
// snapshot pickle in 0.13 s against 0.45 s); anything else (several members, damage, a size over
// 4 GiB or the expansion limit) goes through zlib's streaming inflate, which also words the errors.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace fraglab {

inline bool is_gzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// Decompresses a whole gzip file (all members). Throws FormatError naming `name` and the
// compressed byte offset where the data is corrupt or ends early.
std::string gunzip(std::string_view compressed, const std::string& name);

// The same into a buffer that is not zero-filled first: an anonymous mapping whose pages the
// kernel provides in one call (MAP_POPULATE; faulting 56k pages one at a time cost a tenth of a
// 231 MB snapshot's import) and the inflater writes once. What the snapshot reader parses.
class InflatedBytes {
 public:
  InflatedBytes(void* map, size_t map_size, size_t size) : map_(map), map_size_(map_size), size_(size) {}
  explicit InflatedBytes(std::string text) : text_(std::move(text)), size_(text_.size()) {}
  ~InflatedBytes();
  InflatedBytes(InflatedBytes&& o) noexcept
      : map_(std::exchange(o.map_, nullptr)), map_size_(o.map_size_), text_(std::move(o.text_)), size_(o.size_) {}
  InflatedBytes(const InflatedBytes&) = delete;
  InflatedBytes& operator=(const InflatedBytes&) = delete;
  InflatedBytes& operator=(InflatedBytes&&) = delete;
  std::string_view bytes() const { return {map_ ? static_cast<const char*>(map_) : text_.data(), size_}; }

 private:
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::string text_;
  size_t size_ = 0;
};
InflatedBytes inflate_gzip(std::string_view compressed, const std::string& name);

// Thrown by InflatingBytes when its stream is not the plain case it handles (damage, several members,
// a trailer that states another size): the caller inflates again with inflate_gzip(), which words
// the error or reads the unusual file.
struct InflateAbandoned {};

// A single-member gzip file inflating on a thread of its own into a buffer of the size its trailer
// states, while the caller reads what is ready: the snapshot reader parses the pickle as it comes
// out, so inflating costs the other core's time instead of adding to the parse (ISA-L's igzip, a
// streaming inflate as fast as libdeflate's one call).
class InflatingBytes {
 public:
  // Nothing unless the file is one gzip member whose trailer gives a size within the expansion
  // budget. `compressed` must outlive the object. `file_mapping`: `compressed` is a read-only
  // mapping of a file, whose pages are dropped as they are inflated (they read back from the file).
  static std::unique_ptr<InflatingBytes> start(std::string_view compressed, bool file_mapping = false);
  ~InflatingBytes();  // stops the thread
  InflatingBytes(const InflatingBytes&) = delete;
  InflatingBytes& operator=(const InflatingBytes&) = delete;

  // The whole output's extent; bytes past ready() are not written yet.
  std::string_view bytes() const { return {static_cast<const char*>(map_), size_}; }
  // Waits until more than `have` bytes are ready, or all are; returns how many are. Throws
  // InflateAbandoned when the stream turned out damaged or unusual.
  size_t wait_beyond(size_t have);
  // Waits for the end of the stream; throws InflateAbandoned unless it inflated to exactly the stated
  // size, with a good checksum and nothing after it.
  void finish();

 private:
  InflatingBytes(std::string_view compressed, void* map, size_t size, bool file_mapping);
  void run();
  void drop_input(size_t consumed);
  static constexpr size_t kFailed = SIZE_MAX;  // ready_'s value once the producer gave up
  std::string_view compressed_;
  bool file_mapping_;
  size_t dropped_ = 0;  // input bytes whose pages were given back
  void* map_;
  size_t size_;
  std::atomic<size_t> ready_{0};
  std::atomic<bool> stop_{false};
  bool done_ = false;  // the stream ended well (read after the thread is joined)
  std::thread thread_;
};

// The first (up to) `max_out` decompressed bytes of the gzip data in `compressed`, which may
// itself be only the start of a file: what content detection needs. Never throws; where the
// data is corrupt it returns what came out before (the reader reports the damage).
std::string gunzip_prefix(std::string_view compressed, size_t max_out);

// The whole file at `path`, decompressed when it is gzip (the text formats accept both).
std::string read_maybe_gzipped(const std::string& path);

}  // namespace fraglab
