// JSON Lines traces: one JSON object per line, for small hand-written traces in tests
// and docs. An optional first line is the header:
//   {"fraglab_trace": 1, "device": 0, "streams": [0, 7], "allocator_settings": {...},
//    "stacks": [[{"name": "f", "filename": "a.py", "line": 3}, ...], ...]}
// then events:
//   {"op": "alloc", "id": 7, "size": 1048576, "stream": 0, "t": 10, "stack": 1}
//   {"op": "free", "id": 7, "t": 12}
//   {"op": "empty_cache"}
//   {"op": "segment_alloc", "addr": 4096, "size": 2097152}   (reference events likewise)
// `id` may be any integer or string; ids are renumbered to dense slots on reading.
// `stream` is the stream handle as recorded (0 = the default stream).
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "traces/trace_io.h"

namespace fraglab {

// The keys only a JSON Lines trace's first object has: its header's, or an event's.
inline constexpr std::array<std::string_view, 2> kJsonlKeys = {"fraglab_trace", "op"};
// The format table's recogniser (jsonl_recognise.cpp).
bool looks_like_jsonl(std::string_view head);
Trace read_jsonl(const std::string& path);
Trace parse_jsonl(const std::string& text, const std::string& name);
std::unique_ptr<TraceWriter> create_jsonl_writer(const std::string& path, const TraceMeta& meta);

}  // namespace fraglab
