// fraglab's native trace format (.fltrace): compact, streaming, fast.
// See the layout description in native_format.cpp.
#pragma once

#include <memory>
#include <string>

#include "traces/trace_io.h"

namespace fraglab {

std::unique_ptr<EventSource> open_native(const std::string& path);
std::unique_ptr<TraceWriter> create_native_writer(const std::string& path, const TraceMeta& meta);

}  // namespace fraglab
