// gzip decompression through zlib, with errors that say where the stream broke.
#pragma once

#include <string>

namespace fraglab {

inline bool is_gzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// Decompresses a whole gzip file (all members). Throws FormatError naming `name` and the
// compressed byte offset where the data is corrupt or ends early.
std::string gunzip(const std::string& compressed, const std::string& name);

// The whole file at `path`, decompressed when it is gzip (the text formats accept both).
std::string read_maybe_gzipped(const std::string& path);

}  // namespace fraglab
