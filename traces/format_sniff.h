// What a file's first bytes say it holds: traces are recognised by their content, not by
// their name (a `.json` file may hold a pickle, a `.pkl` file JSON, a log may be named
// anything). trace_io.cpp's format table pairs each format with its test here.
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

#include <optional>
#include <string>
#include <string_view>

namespace fraglab {

// The first `max_bytes` of the file at `path`, gunzipped when the file is gzip (then
// `gzip` is set). Throws FormatError when the file cannot be opened.
struct FileHead {
  std::string bytes;
  bool gzip = false;
};
FileHead read_head(const std::string& path, size_t max_bytes = 64 * 1024);

bool looks_like_native(std::string_view head);
bool looks_like_pickle(std::string_view head);
bool looks_like_json_snapshot(std::string_view head);
bool looks_like_jsonl(std::string_view head);
bool looks_like_rmm_log(std::string_view head);

// True when the text, after a UTF-8 byte-order mark and white space, starts a JSON object or
// array: how the snapshot reader tells JSON from pickle once the format is known.
bool starts_as_json(std::string_view bytes);
// Text fraglab does not read that would otherwise be taken for a pickle ("unknown opcode 0xff"):
// UTF-16 (a byte-order mark, or NULs beside the first bracket) and JSON opening with a comment.
// Says what it is and what to do; nullopt for anything else.
std::optional<std::string> unsupported_text(std::string_view head);

}  // namespace fraglab
