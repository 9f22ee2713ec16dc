// Placeholder until the native format lands (issue 2, in progress on a branch).
#include "traces/native_format.h"

#include "traces/format_error.h"

namespace fraglab {

std::unique_ptr<EventSource> open_native(const std::string& path) {
  throw FormatError::in_file(path, "native format reading is not built yet");
}
std::unique_ptr<TraceWriter> create_native_writer(const std::string& path, const TraceMeta&) {
  throw FormatError::in_file(path, "native format writing is not built yet");
}

}  // namespace fraglab
