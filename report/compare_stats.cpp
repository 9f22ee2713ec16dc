#include "report/compare_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "allocators/registry.h"

namespace fraglab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Competition ranking ("1224") of one trace's contenders: by (ran out of memory, peak reserved).
void rank_trace(const std::vector<const CompareRow*>& cells, const std::vector<bool>& is_bound, size_t t, size_t P,
                Eigen::ArrayXXd& rank) {
  for (size_t p = 0; p < P; ++p) {
    const CompareRow* a = cells[t * P + p];
    if (!a || is_bound[p]) continue;
    int better = 0;
    for (size_t q = 0; q < P; ++q) {
      const CompareRow* b = cells[t * P + q];
      if (b && !is_bound[q] && std::pair(b->ooms > 0, b->peak_reserved) < std::pair(a->ooms > 0, a->peak_reserved))
        ++better;
    }
    rank(static_cast<Eigen::Index>(t), static_cast<Eigen::Index>(p)) = better + 1;
  }
}

// Points to minimise in every coordinate: the ones no other point dominates (as good in
// each coordinate, better in one).
template <class Point>
std::vector<bool> pareto_front(const std::vector<std::optional<Point>>& points) {
  std::vector<bool> front(points.size(), false);
  for (size_t p = 0; p < points.size(); ++p) {
    if (!points[p]) continue;
    front[p] = std::none_of(points.begin(), points.end(), [&](const std::optional<Point>& q) {
      return q && *q != *points[p] && std::get<0>(*q) <= std::get<0>(*points[p]) &&
             std::get<1>(*q) <= std::get<1>(*points[p]) && std::get<2>(*q) <= std::get<2>(*points[p]);
    });
  }
  return front;
}

// Per trace: contenders that are Pareto-optimal on (ran out of memory, peak reserved, device calls).
void pareto_trace(const std::vector<const CompareRow*>& cells, const std::vector<bool>& is_bound, size_t t, size_t P,
                  Eigen::ArrayXXd& pareto) {
  std::vector<std::optional<std::tuple<bool, uint64_t, uint64_t>>> points(P);
  for (size_t p = 0; p < P; ++p)
    if (const CompareRow* row = cells[t * P + p]; row && !is_bound[p])
      points[p] = std::tuple(row->ooms > 0, row->peak_reserved, row->device_calls());
  auto front = pareto_front(points);
  for (size_t p = 0; p < P; ++p) pareto(static_cast<Eigen::Index>(t), static_cast<Eigen::Index>(p)) = front[p];
}

}  // namespace

double calls_per_alloc(const CompareRow& row) {
  return row.allocs ? static_cast<double>(row.device_calls()) / static_cast<double>(row.allocs) : 0.0;
}

CompareSummary summarize(const CompareResults& results) {
  const auto T = static_cast<Eigen::Index>(results.traces.size());
  const auto P = static_cast<Eigen::Index>(results.policies.size());
  auto cells = results.cell_table();
  CompareSummary s;
  s.ratio = Eigen::ArrayXXd::Constant(T, P, kNaN);
  s.rank = Eigen::ArrayXXd::Constant(T, P, kNaN);
  s.pareto = Eigen::ArrayXXd::Zero(T, P);
  for (const auto& policy : results.policies) s.is_bound.push_back(is_bound_policy(policy));
  Eigen::ArrayXXd ooms = Eigen::ArrayXXd::Zero(T, P), seconds = Eigen::ArrayXXd::Zero(T, P);
  Eigen::ArrayXXd calls = Eigen::ArrayXXd::Zero(T, P), allocs = Eigen::ArrayXXd::Zero(T, P);
  Eigen::ArrayXXd present = Eigen::ArrayXXd::Zero(T, P);
  for (Eigen::Index t = 0; t < T; ++t) {
    for (Eigen::Index p = 0; p < P; ++p) {
      const CompareRow* row = cells[static_cast<size_t>(t * P + p)];
      if (!row) continue;
      present(t, p) = 1;
      if (row->live_bytes_bound) s.ratio(t, p) = row->reserved_over_bound();
      ooms(t, p) = static_cast<double>(row->ooms);
      seconds(t, p) = row->replay_seconds;
      calls(t, p) = static_cast<double>(row->device_calls());
      allocs(t, p) = static_cast<double>(row->allocs);
    }
    rank_trace(cells, s.is_bound, static_cast<size_t>(t), static_cast<size_t>(P), s.rank);
    pareto_trace(cells, s.is_bound, static_cast<size_t>(t), static_cast<size_t>(P), s.pareto);
  }

  const Eigen::ArrayXXd has_ratio = s.ratio.isFinite().cast<double>();
  const Eigen::ArrayXXd log_ratio = s.ratio.isFinite().select(s.ratio.log(), 0.0);
  const Eigen::ArrayXXd ranked = s.rank.isFinite().select(s.rank, 0.0);
  const Eigen::ArrayXd ratio_count = has_ratio.colwise().sum().transpose();
  const Eigen::ArrayXd geomean = (log_ratio.colwise().sum().transpose() / ratio_count).exp();
  const Eigen::ArrayXd worst = s.ratio.isFinite().select(s.ratio, 0.0).colwise().maxCoeff().transpose();
  const Eigen::ArrayXd trace_count = present.colwise().sum().transpose();
  const Eigen::ArrayXd ranked_count = s.rank.isFinite().cast<double>().colwise().sum().transpose();
  const Eigen::ArrayXd mean_rank = ranked.colwise().sum().transpose() / ranked_count;
  const Eigen::ArrayXd wins = (s.rank == 1.0).cast<double>().colwise().sum().transpose();
  const Eigen::ArrayXd oom_sum = ooms.colwise().sum().transpose();
  const Eigen::ArrayXd seconds_sum = seconds.colwise().sum().transpose();
  const Eigen::ArrayXd alloc_calls = calls.colwise().sum().transpose() / allocs.colwise().sum().transpose().max(1.0);

  for (Eigen::Index p = 0; p < P; ++p) {
    PolicySummary ps;
    ps.policy = static_cast<size_t>(p);
    ps.geomean_ratio = ratio_count(p) > 0 ? geomean(p) : kNaN;
    ps.worst_ratio = worst(p);
    ps.mean_rank = ranked_count(p) > 0 ? mean_rank(p) : kNaN;
    ps.wins = static_cast<size_t>(wins(p));
    ps.traces = static_cast<size_t>(trace_count(p));
    ps.ooms = static_cast<uint64_t>(oom_sum(p));
    ps.replay_seconds = seconds_sum(p);
    ps.calls_per_alloc = alloc_calls(p);
    ps.bound = s.is_bound[static_cast<size_t>(p)];
    (ps.bound ? s.bounds : s.ranking).push_back(ps);
  }
  std::vector<std::optional<std::tuple<bool, double, double>>> points;
  for (const auto& ps : s.ranking)
    points.push_back(
        std::tuple(ps.ooms > 0, std::isnan(ps.geomean_ratio) ? HUGE_VAL : ps.geomean_ratio, ps.calls_per_alloc));
  auto front = pareto_front(points);
  for (size_t i = 0; i < s.ranking.size(); ++i) s.ranking[i].pareto = front[i];
  auto key = [](const PolicySummary& a) {
    // NaN sorts last.
    return std::tuple(a.ooms > 0, std::isnan(a.geomean_ratio), std::isnan(a.geomean_ratio) ? 0.0 : a.geomean_ratio,
                      std::isnan(a.mean_rank) ? 1e300 : a.mean_rank, a.policy);
  };
  std::sort(s.ranking.begin(), s.ranking.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  return s;
}

}  // namespace fraglab
