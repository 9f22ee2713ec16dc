// Statistics over a results matrix (traces x policy configurations), with Eigen.
//
// The central number per policy is the geometric mean over traces of peak reserved over
// the live-bytes bound: ratios of differently sized traces average fairly only
// geometrically (a 2x overhead on a small trace and a 1.1x on a big one are not "1.55x").
// Per trace, policies are ranked by peak reserved, those that ran out of memory after
// those that did not (failing an allocation is not saving memory); ties share a rank.
//
// Bounds (PolicyInfo::is_bound: `passthrough`, one driver call per request, and `oracle`,
// which sees the future) are not ranked: they are what the contenders are measured
// against, and "use passthrough" is no advice. Beside memory, each contender gets a Pareto
// mark for memory against device calls: no other contender reserves less *and* calls the
// driver less often (a cudaMalloc costs ~60 us, a cached block ~0.2 us).
#pragma once

#include <Eigen/Core>
#include <string>
#include <vector>

#include "report/compare_results.h"

namespace fraglab {

struct PolicySummary {
  size_t policy = 0;           // index into CompareResults::policies
  double geomean_ratio = 0;    // geometric mean of reserved / bound (NaN: no trace with a bound)
  double worst_ratio = 0;      // the largest reserved / bound
  double mean_rank = 0;        // mean per-trace rank (1 = best)
  size_t wins = 0;             // traces where it ranks first
  size_t traces = 0;           // traces it has results for
  uint64_t ooms = 0;           // out-of-memory events over all traces
  double calls_per_alloc = 0;  // device calls over allocations, all traces (1+: no caching at all)
  double replay_seconds = 0;   // summed replay time
  bool bound = false;          // a bound, not ranked (ranking holds contenders only)
  bool pareto = false;         // no contender has both a lower geometric mean and fewer calls per alloc
};

struct CompareSummary {
  Eigen::ArrayXXd ratio;   // T x P reserved / bound; NaN where absent or the bound is 0
  Eigen::ArrayXXd rank;    // T x P per-trace rank among contenders; NaN where absent and for bounds
  Eigen::ArrayXXd pareto;  // T x P 1 where a contender is Pareto-optimal on the trace (peak reserved vs device calls)
  std::vector<PolicySummary> ranking;  // contenders, best first: by geometric mean, then mean rank, then name order
  std::vector<PolicySummary> bounds;   // the bounds, in command order
  std::vector<bool> is_bound;          // by policy index
};

// Device calls per allocation of one row (0 when it has no allocations).
double calls_per_alloc(const CompareRow& row);

CompareSummary summarize(const CompareResults& results);

}  // namespace fraglab
