#include "sim/bounds.h"

#include <algorithm>

#include "allocators/offline_plan.h"

namespace fraglab {

TraceBounds compute_bounds(const std::vector<Event>& events, bool with_oracle, uint64_t limit) {
  limit = std::min<uint64_t>(limit, events.size());
  TraceBounds bounds;
  LiveBytesBound live;
  for (uint64_t i = 0; i < limit; ++i) live.add(events[i]);
  bounds.live_bytes = live.peak();
  // 512 B: the alignment of the oracle policy's default, so the bound is that policy's peak.
  if (with_oracle) {
    auto plan = detail::shared_plan_greedy_by_size(events, 512, limit);
    bounds.oracle = plan->peak;
    bounds.oracle_unsearched = plan->unsearched;
  }
  return bounds;
}

}  // namespace fraglab
