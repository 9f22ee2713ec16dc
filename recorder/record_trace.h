// Turns the recorder's raw calls into a fraglab trace: each successful cudaMalloc* is an
// allocation (with the address it returned), each cudaFree* of a pointer recorded
// earlier its free, a failed allocation an Oom reference event. Frees of pointers the
// recorder never saw allocated (made before it was loaded, or nullptr) are dropped and
// counted in TraceMeta::dropped_unknown_frees.
#pragma once

#include <string>

#include "recorder/record_buffer.h"
#include "traces/trace.h"

namespace fraglab::record {

Trace to_trace(const RecordBuffer& buffer, uint64_t count, const std::string& source);

}  // namespace fraglab::record
