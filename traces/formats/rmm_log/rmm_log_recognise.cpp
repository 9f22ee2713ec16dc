// The RMM log recogniser (trace_io.cpp's format table): the header logging_resource_adaptor writes, or,
// for a log printed without it, a first row of six fields whose third is an RMM action.
#include <algorithm>

#include "traces/formats/format_sniff.h"
#include "traces/formats/rmm_log/rmm_log_format.h"

namespace fraglab {

bool looks_like_rmm_log(std::string_view head) {
  std::string_view line = first_line(head);
  if (line == "Thread,Time,Action,Pointer,Size,Stream") return true;
  // A log printed without its header (rmm_log_format.h): Thread,Time,Action,Pointer,Size,Stream.
  if (std::count(line.begin(), line.end(), ',') != 5) return false;
  size_t c0 = line.find(','), c1 = line.find(',', c0 + 1), c2 = line.find(',', c1 + 1);
  std::string_view thread = line.substr(0, c0), action = line.substr(c1 + 1, c2 - c1 - 1);
  return is_decimal(thread) &&
         (action == "allocate" || action == "free" || action == "allocate failure" || action == "deallocate");
}

}  // namespace fraglab
