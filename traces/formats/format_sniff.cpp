#include "traces/formats/format_sniff.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "traces/io/format_error.h"
#include "traces/io/gzip.h"

namespace fraglab {

std::string_view skip_bom_and_space(std::string_view s) {
  if (s.starts_with("\xEF\xBB\xBF")) s.remove_prefix(3);
  size_t i = s.find_first_not_of(" \t\r\n");
  return i == std::string_view::npos ? std::string_view{} : s.substr(i);
}

namespace {

// The keys of a JSON value's first object (JsonFirstKeys). Stops (returns false) once it has them; the
// head is a prefix of the file, so running out of input is expected and harmless.
class FirstKeys final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<std::string> keys;
  bool top_is_array = false;

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool string(string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return open(false); }
  bool key(string_t& k) override {
    if (depth_ == target_) keys.push_back(k);
    return keys.size() < 64;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  int depth_ = 0, target_ = 1;

  bool open(bool array) {
    if (depth_ == 0 && array) top_is_array = true, target_ = 2;
    ++depth_;
    // An array's first element must be an object for it to have keys.
    return !(top_is_array && depth_ == 2 && array);
  }
  bool close() { return --depth_ >= target_; }              // the first object is done
  bool scalar() { return !(top_is_array && depth_ == 1); }  // an array of scalars: no keys
};

}  // namespace

JsonFirstKeys json_first_keys(std::string_view head) {
  FirstKeys sax;
  head = skip_bom_and_space(head);
  nlohmann::json::sax_parse(head.begin(), head.end(), &sax, nlohmann::json::input_format_t::json, /*strict=*/false);
  return {std::move(sax.keys), sax.top_is_array};
}

std::string_view first_line(std::string_view s) {
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string_view::npos) end = s.size();
    std::string_view line = s.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) return line;
    start = end + 1;
  }
  return {};
}

bool is_decimal(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

FileHead read_head(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FormatError::in_file(path, std::string("cannot open: ") + std::strerror(errno));
  FileHead head;
  head.bytes.resize(max_bytes);
  size_t got = 0;
  while (got < max_bytes) {
    ssize_t n = ::read(fd, head.bytes.data() + got, max_bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  head.bytes.resize(got);
  if (is_gzip(head.bytes)) {
    head.bytes = gunzip_prefix(head.bytes, max_bytes);
    head.gzip = true;
  }
  return head;
}

std::optional<std::string> unsupported_text(std::string_view head) {
  if (head.size() >= 2) {
    auto b0 = static_cast<unsigned char>(head[0]), b1 = static_cast<unsigned char>(head[1]);
    if ((b0 == 0xff && b1 == 0xfe) || (b0 == 0xfe && b1 == 0xff) || (b0 != 0 && b1 == 0 && (b0 == '{' || b0 == '[')) ||
        (b0 == 0 && (b1 == '{' || b1 == '[')))
      return std::string(
          "UTF-16 text (JSON?): fraglab reads JSON and JSON Lines in UTF-8; convert it, e.g. "
          "`iconv -f UTF-16 -t UTF-8`");
  }
  std::string_view s = skip_bom_and_space(head);
  if (s.starts_with("//") || s.starts_with("/*"))
    return std::string("JSON with comments: fraglab reads standard JSON (RFC 8259); remove the comments");
  return std::nullopt;
}

bool starts_as_json(std::string_view bytes) {
  std::string_view s = skip_bom_and_space(bytes);
  return !s.empty() && (s[0] == '{' || s[0] == '[');
}

}  // namespace fraglab
