// Placeholder until the pickle reader lands (issue 2, in progress on a branch).
#include "traces/pytorch_snapshot.h"

#include "traces/format_error.h"

namespace fraglab {

Trace parse_pytorch_snapshot(const std::string&, const std::string& name, const ReadOptions&) {
  throw FormatError::in_file(name, "PyTorch snapshot reading is not built yet");
}
Trace read_pytorch_snapshot(const std::string& path, const ReadOptions& options) {
  return parse_pytorch_snapshot("", path, options);
}

}  // namespace fraglab
