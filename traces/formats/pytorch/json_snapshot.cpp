// JSON snapshot -> pickle data opcodes -> the snapshot importer: see json_snapshot.h.
// Opcodes and their operands are CPython's (Lib/pickle.py); the reader is
// traces/formats/pytorch/pickle_reader.h.
#include "traces/formats/pytorch/json_snapshot.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "traces/formats/pytorch/pytorch_snapshot.h"
#include "traces/io/format_error.h"

namespace fraglab {

namespace {

// Containers nested this deep or less get an entry in the offset side table: down to the
// blocks of a segment and the frames list of a trace entry, the things errors name. Frames
// themselves (the bulk of a snapshot with stacks) map to their enclosing list.
constexpr int kRecordedDepth = 5;
// Strings up to this long are memoized (keys, actions, frame names and file names); there
// are few distinct ones, so the table stays small; it stops growing at kMaxMemo entries.
constexpr size_t kMemoMaxLength = 512;
constexpr size_t kMaxMemo = size_t{1} << 20;

// A char iterator that publishes how far nlohmann's lexer has read. The lexer reads one
// character at a time and never past a '{' or '[' before the parser reports it, so at
// start_object/start_array the bracket is the last character read.
class TrackedIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedIterator(const char* p, const char** read_to) : p_(p), read_to_(read_to) {}
  reference operator*() const { return *p_; }
  TrackedIterator& operator++() {
    *read_to_ = ++p_;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedIterator& other) const { return p_ == other.p_; }
  bool operator!=(const TrackedIterator& other) const { return p_ != other.p_; }

 private:
  const char* p_;
  const char** read_to_;
};

// Writes pickle opcodes (protocol 4).
class PickleWriter {
 public:
  explicit PickleWriter(size_t reserve) {
    out_.reserve(reserve);
    out_ += "\x80\x04";  // PROTO 4
  }
  std::string& bytes() { return out_; }
  uint64_t offset() const { return out_.size(); }

  void op(uint8_t code) { out_ += static_cast<char>(code); }
  void none() { op('N'); }
  void boolean(bool v) { op(v ? 0x88 : 0x89); }  // NEWTRUE / NEWFALSE
  void integer(int64_t v) {
    if (v >= 0 && v < 0x100) {
      op('K');  // BININT1
      op(static_cast<uint8_t>(v));
    } else if (v >= 0 && v < 0x10000) {
      op('M');  // BININT2
      le(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');  // BININT
      le(static_cast<uint64_t>(v), 4);
    } else {
      op(0x8a);  // LONG1, 8 bytes of two's complement
      op(8);
      le(static_cast<uint64_t>(v), 8);
    }
  }
  void unsigned_integer(uint64_t v) {
    if (v <= static_cast<uint64_t>(INT64_MAX)) return integer(static_cast<int64_t>(v));
    op(0x8a);  // LONG1 needs a ninth (sign) byte above INT64_MAX
    op(9);
    le(v, 8);
    op(0);
  }
  void real(double v) {
    op('G');  // BINFLOAT: big-endian IEEE 754
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 7; i >= 0; --i) op(static_cast<uint8_t>(bits >> (8 * i)));
  }
  void string(const std::string& s) {
    if (s.size() <= kMemoMaxLength) {
      if (auto it = memo_.find(s); it != memo_.end()) return get(it->second);
    }
    raw_string(s);
    if (s.size() <= kMemoMaxLength && memo_.size() < kMaxMemo) {
      op(0x94);  // MEMOIZE: the next memo index, which is memo_.size()
      memo_.emplace(s, static_cast<uint32_t>(memo_.size()));
    }
  }

 private:
  std::string out_;
  std::unordered_map<std::string, uint32_t> memo_;

  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) op(static_cast<uint8_t>(v >> (8 * i)));
  }
  void raw_string(const std::string& s) {
    if (s.size() < 0x100) {
      op(0x8c);  // SHORT_BINUNICODE
      op(static_cast<uint8_t>(s.size()));
    } else if (s.size() <= UINT32_MAX) {
      op('X');  // BINUNICODE
      le(s.size(), 4);
    } else {
      op(0x8d);  // BINUNICODE8
      le(s.size(), 8);
    }
    out_ += s;
  }
  void get(uint32_t index) {
    if (index < 0x100) {
      op('h');  // BINGET
      op(static_cast<uint8_t>(index));
    } else {
      op('j');  // LONG_BINGET
      le(index, 4);
    }
  }
};

// The SAX handler: each JSON event becomes the opcodes that build the same Python value.
// Objects are EMPTY_DICT MARK key value ... SETITEMS, arrays EMPTY_LIST MARK item ... APPENDS.
class Transcoder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  Transcoder(const std::string& name, const char* begin, const char* const* read_to, size_t size)
      : name_(name), begin_(begin), read_to_(read_to), pickle_(size / 2 + 64) {}

  TranscodedSnapshot finish() {
    pickle_.op('.');  // STOP
    return {std::move(pickle_.bytes()), std::move(origins_)};
  }

  bool null() override { return pickle_.none(), true; }
  bool boolean(bool v) override { return pickle_.boolean(v), true; }
  bool number_integer(number_integer_t v) override { return pickle_.integer(v), true; }
  bool number_unsigned(number_unsigned_t v) override { return pickle_.unsigned_integer(v), true; }
  bool number_float(number_float_t v, const string_t& text) override {
    // nlohmann reads an integer beyond 64 bits as a float: no snapshot field holds one, and the reader
    // would say "must be an int, not float" of what the file wrote as an integer.
    if (text.find_first_of(".eE") == string_t::npos) {
      // The reader has taken the character after the number too (its end shows only there).
      const uint64_t end = static_cast<uint64_t>(*read_to_ - begin_);
      throw FormatError::at_offset(
          name_, end > text.size() ? end - text.size() - 1 : 0,
          "integer " + (text.size() > 40 ? text.substr(0, 40) + "..." : text) + " is out of range (64 bits at most)");
    }
    return pickle_.real(v), true;
  }
  bool string(string_t& v) override { return pickle_.string(v), true; }
  bool key(string_t& v) override { return pickle_.string(v), true; }
  bool binary(binary_t&) override { return false; }  // JSON text has no binary values
  bool start_object(std::size_t) override { return open('}'); }
  bool end_object() override { return close('u'); }
  bool start_array(std::size_t) override { return open(']'); }
  bool end_array() override { return close('e'); }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    // nlohmann counts characters read, so the offending one is at position - 1. Its message
    // starts "[json.exception.parse_error.101] parse error at line L, column C: ..."; keep the
    // part after the location.
    std::string what = e.what();
    if (size_t colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    const uint64_t at = position ? position - 1 : 0;
    const uint64_t read = static_cast<uint64_t>(*read_to_ - begin_);
    if (at < read && begin_[at] == '/')
      throw FormatError::at_offset(name_, at, "JSON with a comment: fraglab reads standard JSON (RFC 8259); remove it");
    throw FormatError::at_offset(name_, at, "not valid JSON: " + what);
  }

 private:
  const std::string& name_;
  const char* begin_;
  const char* const* read_to_;
  PickleWriter pickle_;
  std::vector<std::pair<uint64_t, uint64_t>> origins_;
  int depth_ = 0;

  uint64_t bracket_offset() const { return static_cast<uint64_t>(*read_to_ - begin_) - 1; }

  bool open(uint8_t empty_container) {
    if (++depth_ > kMaxJsonDepth)
      throw FormatError::at_offset(
          name_, bracket_offset(),
          fmt::format("JSON nested deeper than {} levels; a snapshot needs about 7", kMaxJsonDepth));
    if (depth_ <= kRecordedDepth) origins_.emplace_back(pickle_.offset(), bracket_offset());
    pickle_.op(empty_container);
    pickle_.op('(');  // MARK
    return true;
  }
  bool close(uint8_t add_items) {
    --depth_;
    pickle_.op(add_items);  // SETITEMS / APPENDS
    return true;
  }
};

}  // namespace

uint64_t TranscodedSnapshot::json_offset(uint64_t pickle_offset) const {
  auto it = std::upper_bound(origins.begin(), origins.end(), std::make_pair(pickle_offset, UINT64_MAX));
  return it == origins.begin() ? 0 : std::prev(it)->second;
}

TranscodedSnapshot transcode_json_snapshot(std::string_view json, const std::string& name) {
  const char* read_to = json.data();
  Transcoder sax(name, json.data(), &read_to, json.size());
  TrackedIterator first(json.data(), &read_to), last(json.data() + json.size(), &read_to);
  if (!nlohmann::json::sax_parse(first, last, &sax, nlohmann::json::input_format_t::json, /*strict=*/true))
    throw FormatError::at_offset(name, static_cast<uint64_t>(read_to - json.data()), "not valid JSON");
  return sax.finish();
}

Trace parse_json_snapshot(std::string_view json, const std::string& name, const ReadOptions& options) {
  TranscodedSnapshot t = transcode_json_snapshot(json, name);
  try {
    return parse_pytorch_snapshot(t.pickle, name, options);
  } catch (const FormatError& e) {
    if (e.where() != FormatError::Where::Offset) throw;
    throw FormatError::at_offset(e.file(), t.json_offset(e.position()), e.detail());
  }
}

}  // namespace fraglab
