// The JSON Lines recogniser (trace_io.cpp's format table): a first line that is an object naming the
// header's or an event's own key.
#include "traces/formats/format_sniff.h"
#include "traces/formats/jsonl/jsonl_format.h"

namespace fraglab {

bool looks_like_jsonl(std::string_view head) {
  std::string_view line = first_line(skip_bom_and_space(head));
  if (!line.starts_with('{')) return false;
  JsonFirstKeys k = json_first_keys(line);
  return !k.top_is_array && k.any_of(kJsonlKeys);
}

}  // namespace fraglab
