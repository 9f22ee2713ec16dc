// Statistics over a results matrix (traces x policy configurations), with Eigen.
//
// The central number per policy is the geometric mean over traces of peak reserved over
// the live-bytes bound: ratios of differently sized traces average fairly only
// geometrically (a 2x overhead on a small trace and a 1.1x on a big one are not "1.55x").
// Per trace, policies are ranked by peak reserved, those that ran out of memory after
// those that did not (failing an allocation is not saving memory); ties share a rank.
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
};

struct CompareSummary {
  Eigen::ArrayXXd ratio;  // T x P reserved / bound; NaN where absent or the bound is 0
  Eigen::ArrayXXd rank;   // T x P per-trace rank; NaN where absent
  std::vector<PolicySummary> ranking;  // best first: by geometric mean, then mean rank, then name order
};

CompareSummary summarize(const CompareResults& results);

}  // namespace fraglab
