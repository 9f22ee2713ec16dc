// Offline placement of a whole trace: every allocation's lifetime is known in advance, so
// addresses can be planned the way static memory planners of inference engines do.
//
// Greedy by size (Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net
// Inference", 2020, "Greedy by Size for Offset Calculation"; TFLite's
// GreedyBySizePlanner; XLA's GlobalDecreasingSizeBestFitHeap): allocations are placed in
// decreasing size order, each at the smallest gap between already-placed allocations whose
// lifetimes overlap its own, or above them all. The peak of offset + size is the memory one
// contiguous arena needs: near-optimal in practice, though not a proven lower bound (that
// problem is NP-hard); the peak of live bytes is the true lower bound.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "traces/trace.h"

namespace fraglab::detail {

constexpr uint64_t kUnplanned = std::numeric_limits<uint64_t>::max();

struct OfflinePlan {
  // Planned offset of the allocation made at each trace position (kUnplanned elsewhere).
  std::vector<uint64_t> offset_at;
  std::vector<uint64_t> size_at;  // its planned (rounded) size
  uint64_t peak = 0;              // bytes the plan needs
  // Allocations placed above everything overlapping them, without the best-fit gap search:
  // the search costs the number of allocations live beside each one, quadratic when ~100K
  // stay live together, so past a work bound (kMaxPlanWork) the rest of the plan is the
  // cheaper, looser placement (still a valid plan; its peak is an upper bound). 0 normally.
  uint64_t unsearched = 0;
};

// Overlap entries the gap search may visit in one plan (~1-2 s), far above what real traces
// need (bert_varlen_train's 60K allocations: see docs/limits.md).
constexpr uint64_t kMaxPlanWork = uint64_t{1} << 28;

// Plans events [0, limit): lifetimes run from the alloc's position to its free's (or to
// `limit` when never freed); sizes round up to `align`. `max_work` bounds the gap search.
OfflinePlan plan_greedy_by_size(const std::vector<Event>& events, uint64_t align,
                                uint64_t limit = std::numeric_limits<uint64_t>::max(),
                                uint64_t max_work = kMaxPlanWork);

// The same plan, computed once: a replay plans the oracle bound and the oracle policy plans
// the same events again, and `compare` replays the oracle beside the bounds it already has.
// The last few plans are kept (thread-safe), keyed by a hash of the planned events rather
// than their address, which a freed trace may pass on to another.
std::shared_ptr<const OfflinePlan> shared_plan_greedy_by_size(const std::vector<Event>& events, uint64_t align,
                                                              uint64_t limit = std::numeric_limits<uint64_t>::max());

}  // namespace fraglab::detail
