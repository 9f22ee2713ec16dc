#include "import/trace_import.h"

#include "sim/pool_checker.h"
#include "traces/formats/pytorch/pool_inference.h"
#include "traces/formats/pytorch/snapshot_model.h"

namespace fraglab {

ReadOptions with_pytorch_model(ReadOptions options) {
  if (!options.model) options.model = &pytorch_snapshot_model();
  return options;
}

Trace load_trace(const std::string& path, const ReadOptions& options) {
  return read_trace(path, with_pytorch_model(options));
}

std::unique_ptr<EventSource> open_trace(const std::string& path, const ReadOptions& options) {
  return stream_trace(path, with_pytorch_model(options));
}

bool pool_check_pending(const Trace& trace) { return pool_check_pending(trace, pytorch_snapshot_model()); }

bool pools_confirmed(const Trace& trace) { return pools_confirmed(trace, pytorch_snapshot_model()); }

}  // namespace fraglab
