// The one error type every reader throws: what went wrong and where (file plus byte
// offset or line), so the CLI can say exactly that and exit with status 2.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace fraglab {

class FormatError : public std::runtime_error {
 public:
  enum class Where { None, Offset, Line };

  FormatError(std::string file, Where where, uint64_t position, const std::string& what);

  static FormatError at_offset(const std::string& file, uint64_t offset, const std::string& what) {
    return FormatError(file, Where::Offset, offset, what);
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
