// The two yardsticks every replay is measured against.
//  - live bytes: the peak of live requested bytes over the trace. No allocator can hold less
//    physical memory at its peak, so it is a true lower bound (whatever its alignment).
//  - oracle: the reserved peak of the offline greedy-by-size plan (allocators/oracle.cpp),
//    which sees every lifetime in advance: near-optimal, what an online policy could approach.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

struct TraceBounds {
  uint64_t live_bytes = 0;
  std::optional<uint64_t> oracle;  // absent when not computed (streamed traces, --no-oracle-bound)
};

// Bounds of events [0, limit). The oracle plan costs about a sort plus the live set per
// allocation; skip it with with_oracle = false.
TraceBounds compute_bounds(const std::vector<Event>& events, bool with_oracle = true,
                           uint64_t limit = std::numeric_limits<uint64_t>::max());

}  // namespace fraglab
