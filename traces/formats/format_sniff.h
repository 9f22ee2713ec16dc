// What a file's first bytes say it holds: traces are recognised by their content, not by
// their name (a `.json` file may hold a pickle, a `.pkl` file JSON, a log may be named
// anything). trace_io.cpp's format table pairs each format with its test, which lives beside the
// format's codec (formats/<format>/*_recognise.cpp); this file reads the head they look at and holds
// what they share.
//
// Each test looks at the start of the (decompressed) file only, and each answers yes only
// for what its format's writers produce, so at most one format claims a file:
//   native        the magic "FLTRACE"
//   pickle        PROTO 0x80 with protocol 2-5, or a protocol 0/1 start: '(' then d/l/t
//                 (MARK, then DICT/LIST/TUPLE or an empty container), '}' / ']' / ')' then a
//                 memo PUT, MARK or STOP
//   JSON snapshot '{' whose top-level keys include one of the snapshot's own
//                 (device_traces, segments, external_annotations, host_segments, host_traces),
//                 or '[' of segment dicts (torch.cuda.memory_snapshot()'s plain list)
//   JSON Lines    '{' whose first object has "fraglab_trace" (the header) or "op" (an event)
//   RMM log       the header Thread,Time,Action,Pointer,Size,Stream, or, for logs printed
//                 without it, a first row of six fields whose third is an RMM action
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fraglab {

// The first `max_bytes` of the file at `path`, gunzipped when the file is gzip (then
// `gzip` is set). Throws FormatError when the file cannot be opened.
struct FileHead {
  std::string bytes;
  bool gzip = false;
};
FileHead read_head(const std::string& path, size_t max_bytes = 64 * 1024);

// For the recognisers: the text after a UTF-8 byte-order mark and white space; its first non-empty line
// (a trailing '\r' dropped); whether it is all decimal digits.
std::string_view skip_bom_and_space(std::string_view s);
std::string_view first_line(std::string_view s);
bool is_decimal(std::string_view s);
// The keys of a JSON value's first object: the top-level object's own keys, or, for an array, those of
// its first element (at most 64). The head may be cut anywhere.
struct JsonFirstKeys {
  std::vector<std::string> keys;
  bool top_is_array = false;
  template <size_t N>
  bool any_of(const std::array<std::string_view, N>& wanted) const {
    for (const auto& k : keys)
      for (std::string_view w : wanted)
        if (k == w) return true;
    return false;
  }
};
JsonFirstKeys json_first_keys(std::string_view head);

// True when the text, after a UTF-8 byte-order mark and white space, starts a JSON object or
// array: how the snapshot reader tells JSON from pickle once the format is known.
bool starts_as_json(std::string_view bytes);
// Text fraglab does not read that would otherwise be taken for a pickle ("unknown opcode 0xff"):
// UTF-16 (a byte-order mark, or NULs beside the first bracket) and JSON opening with a comment.
// Says what it is and what to do; nullopt for anything else.
std::optional<std::string> unsupported_text(std::string_view head);

}  // namespace fraglab
