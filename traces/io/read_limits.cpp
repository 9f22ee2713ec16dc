#include "traces/io/read_limits.h"

namespace fraglab {

namespace {
ReadLimits g_limits;
}

const ReadLimits& read_limits() { return g_limits; }
void set_read_limits(const ReadLimits& limits) { g_limits = limits; }

}  // namespace fraglab
