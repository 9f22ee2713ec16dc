// gzip decompression through zlib, with errors that say where the stream broke.
#pragma once

#include <string>
#include <string_view>

namespace fraglab {

inline bool is_gzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// Decompresses a whole gzip file (all members). Throws FormatError naming `name` and the
// compressed byte offset where the data is corrupt or ends early.
std::string gunzip(const std::string& compressed, const std::string& name);

// The first (up to) `max_out` decompressed bytes of the gzip data in `compressed`, which may
// itself be only the start of a file: what content detection needs. Never throws; where the
// data is corrupt it returns what came out before (the reader reports the damage).
std::string gunzip_prefix(std::string_view compressed, size_t max_out);

// The whole file at `path`, decompressed when it is gzip (the text formats accept both).
std::string read_maybe_gzipped(const std::string& path);

}  // namespace fraglab
