// The one error type every reader throws: what went wrong and where (file plus byte
// offset or line), so the CLI can say exactly that and exit with status 2.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fraglab {

// Input bytes quoted in a message (names, values, file names) reach a terminal: control bytes
// and DEL come out as \xNN, so a hostile file cannot move the cursor or change colours.
inline std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

class FormatError : public std::runtime_error {
 public:
  // InflatedOffset: a byte offset into the decompressed data of a gzip file (said so in the message).
  enum class Where { None, Offset, Line, InflatedOffset };

  FormatError(std::string file, Where where, uint64_t position, const std::string& what);

  static FormatError at_offset(const std::string& file, uint64_t offset, const std::string& what) {
    return FormatError(file, Where::Offset, offset, what);
  }
  static FormatError at_inflated_offset(const std::string& file, uint64_t offset, const std::string& what) {
    return FormatError(file, Where::InflatedOffset, offset, what);
  }
  static FormatError at_line(const std::string& file, uint64_t line, const std::string& what) {
    return FormatError(file, Where::Line, line, what);
  }
  static FormatError in_file(const std::string& file, const std::string& what) {
    return FormatError(file, Where::None, 0, what);
  }

  const std::string& file() const { return file_; }
  Where where() const { return where_; }
  uint64_t position() const { return position_; }
  const std::string& detail() const { return detail_; }

 private:
  std::string file_;
  Where where_;
  uint64_t position_;
  std::string detail_;
};

}  // namespace fraglab
