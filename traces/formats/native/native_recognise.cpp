// The native format's recogniser (trace_io.cpp's format table): the magic its writer puts first.
#include "traces/formats/native/native_format.h"

namespace fraglab {

bool looks_like_native(std::string_view head) { return head.starts_with("FLTRACE"); }

}  // namespace fraglab
