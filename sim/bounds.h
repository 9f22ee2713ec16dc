// The two yardsticks every replay is measured against.
//  - live bytes: the peak of live requested bytes over the trace. No allocator can hold less
//    physical memory at its peak, so it is a true lower bound (whatever its alignment).
//  - oracle: the reserved peak of the offline greedy-by-size plan (allocators/oracle.cpp),
//    which sees every lifetime in advance: near-optimal, what an online policy could approach.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

struct TraceBounds {
  uint64_t live_bytes = 0;
  std::optional<uint64_t> oracle;  // absent when not computed (streamed traces, --no-oracle-bound)
  uint64_t oracle_unsearched = 0;  // allocations the plan placed past its work bound (offline_plan.h)
};

// The live-bytes bound accumulated one event at a time (a streamed trace's first pass).
class LiveBytesBound {
 public:
  void add(const Event& e) {
    if (e.kind == EventKind::Alloc) {
      if (e.id >= size_of_.size()) size_of_.resize(e.id + 1, 0);
      size_of_[e.id] = e.size;
      live_ += e.size;
      peak_ = std::max(peak_, live_);
    } else if (e.kind == EventKind::Free && e.id < size_of_.size()) {
      live_ -= size_of_[e.id];
      size_of_[e.id] = 0;
    }
  }
  uint64_t peak() const { return peak_; }

 private:
  std::vector<uint64_t> size_of_;  // by allocation id, 0 when not live
  uint64_t live_ = 0, peak_ = 0;
};

// Bounds of events [0, limit). The oracle plan costs about a sort plus the live set per
// allocation; skip it with with_oracle = false.
TraceBounds compute_bounds(const std::vector<Event>& events, bool with_oracle = true,
                           uint64_t limit = std::numeric_limits<uint64_t>::max());

}  // namespace fraglab
