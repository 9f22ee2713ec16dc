#include "sim/bounds.h"

#include <algorithm>

#include "allocators/detail/offline_plan.h"

namespace fraglab {

TraceBounds compute_bounds(const std::vector<Event>& events, bool with_oracle, uint64_t limit) {
  limit = std::min<uint64_t>(limit, events.size());
  TraceBounds bounds;
  std::vector<uint64_t> size_of;  // by allocation id, 0 when not live
  uint64_t live = 0;
  for (uint64_t i = 0; i < limit; ++i) {
    const Event& e = events[i];
    if (e.kind == EventKind::Alloc) {
      if (e.id >= size_of.size()) size_of.resize(e.id + 1, 0);
      size_of[e.id] = e.size;
      live += e.size;
      bounds.live_bytes = std::max(bounds.live_bytes, live);
    } else if (e.kind == EventKind::Free && e.id < size_of.size()) {
      live -= size_of[e.id];
      size_of[e.id] = 0;
    }
  }
  // 512 B: the alignment of the oracle policy's default, so the bound is that policy's peak.
  if (with_oracle) bounds.oracle = detail::plan_greedy_by_size(events, 512, limit).peak;
  return bounds;
}

}  // namespace fraglab
