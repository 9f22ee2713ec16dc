// A JSON nesting check that runs before the DOM parse: nlohmann builds every nested array
// before it can say anything, so ~100 KB of '[' (inflated from far less gzip) once took
// gigabytes before "not valid JSON". The scan is one pass over the bytes, strings skipped.
#pragma once

#include <cstdint>
#include <string_view>

namespace fraglab {

// The byte offset in `text` of the first '[' or '{' that opens level max_depth + 1, or
// UINT64_MAX when the nesting stays within max_depth.
inline uint64_t json_too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return UINT64_MAX;
}

}  // namespace fraglab
