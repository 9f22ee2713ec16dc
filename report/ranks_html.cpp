#include "report/ranks_html.h"

#include <fmt/core.h>

#include <algorithm>

#include "report/diagnose_html.h"
#include "report/svg_chart.h"
#include "traces/units.h"

namespace fraglab {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string groups_table(const std::vector<GroupDiff>& groups, const char* what, size_t top) {
  std::string out =
      fmt::format("<table><tr><th>{}</th><th>live at the peak, beyond the lightest rank</th></tr>\n", what);
  for (size_t i = 0; i < groups.size() && i < top; ++i) {
    int64_t d = groups[i].delta_live_at_peak();
    if (d == 0 && i > 0) break;
    out += fmt::format("<tr><td>{}</td><td class=n>{}{}</td></tr>\n", svg::escape(groups[i].key), d < 0 ? "-" : "+",
                       format_size(static_cast<uint64_t>(d < 0 ? -d : d)));
  }
  return out + "</table>\n";
}

// Every rank's live (solid) and recorded reserved bytes over the job's clock, one colour per rank; the limit
// rank's name says so.
std::string timelines(const RanksReport& r) {
  int64_t t0 = INT64_MAX;
  for (const auto& k : r.ranks)
    if (!k.timeline.empty()) t0 = std::min(t0, k.timeline.front().time_us);
  std::vector<svg::Series> series;
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const RankRun& k = r.ranks[i];
    std::string tag = k.rank == r.limit_rank ? " (the limit)" : "";
    svg::Series live{fmt::format("rank {} live{}", k.rank, tag), svg::palette(2 * i), {}, {}};
    svg::Series reserved{fmt::format("rank {} reserved (recorded)", k.rank), svg::palette(2 * i + 1), {}, {}};
    for (const RankPoint& p : k.timeline) {
      double x = static_cast<double>(p.time_us - t0) / 1e6;
      live.x.push_back(x);
      live.y.push_back(static_cast<double>(p.live) / kGiB);
      reserved.x.push_back(x);
      reserved.y.push_back(static_cast<double>(p.reserved) / kGiB);
    }
    series.push_back(std::move(live));
    series.push_back(std::move(reserved));
  }
  double cap = 0;
  for (const auto& k : r.ranks)
    if (k.run.capacity) cap = std::max(cap, static_cast<double>(*k.run.capacity) / kGiB);
  return svg::line_chart(series, "seconds on the job's clock", "GiB", cap, cap > 0 ? "capacity" : "");
}

std::string job_html(const std::string& job, const RanksReport& r, size_t top) {
  std::string out = "<h2>Job " + svg::escape(job) + fmt::format(" ({} ranks)</h2>\n", r.ranks.size());
  out += "<p class=\"verdict\"><b>The limit:</b> " + svg::escape(r.limit_reason) + "</p>\n";
  out +=
      "<table><tr><th>rank</th><th>device</th><th>recorded peak</th><th>replay peak</th><th>live bound</th>"
      "<th>capacity</th><th>OOMs</th><th>fidelity</th><th>snapshot</th></tr>\n";
  for (const auto& k : r.ranks)
    out += fmt::format(
        "<tr{}><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>"
        "<td class=n>{}</td><td class=n>{}</td><td>{}</td><td><small>{}</small></td></tr>\n",
        k.rank == r.limit_rank ? " style=\"background:#fdecea\"" : "", k.rank, k.device,
        format_size(k.run.recorded_peak_reserved), format_size(k.run.peak_reserved),
        format_size(k.run.live_bytes_bound), k.run.capacity ? format_size(*k.run.capacity) : "unlimited",
        k.run.recorded_ooms, k.fidelity_exact ? "exact" : svg::escape(k.fidelity_note), svg::escape(k.path));
  out += "</table>\n";
  out += "<h3>Every rank's timeline</h3>\n" + timelines(r);
  out += "<ul>\n";
  for (const auto& d : r.divergence)
    out += d.same ? fmt::format("<li>rank {} made the same {} allocations as rank {}</li>\n", d.rank, d.allocs,
                                r.ranks.front().rank)
                  : fmt::format(
                        "<li>rank {} first differs from rank {} at its allocation {} (event {}): {} "
                        "against {}</li>\n",
                        d.rank, r.ranks.front().rank, d.alloc_ordinal, d.event_index, format_size(d.size),
                        format_size(d.reference_size));
  out += "</ul>\n";
  if (!r.extra_by_category.empty() || !r.extra_by_site.empty()) {
    out += fmt::format("<h3>What rank {} holds beyond the lightest rank</h3>\n", r.limit_rank);
    out += groups_table(r.extra_by_category, "category", top);
    out += groups_table(r.extra_by_site, "call site", top);
  }
  if (r.settings_tried) {
    const char* verdict = !r.capacities_known ? "the lowest worst-rank peak; no capacity known (give --capacity)"
                          : r.fits_all        ? "fits every rank"
                                              : "no setting fits every rank: the least bad";
    out += fmt::format(
        "<h3>One setting for every rank</h3>\n<p><code>PYTORCH_CUDA_ALLOC_CONF=\"{}\"</code>: {}; worst rank's "
        "predicted peak {}; {} settings tried.</p>\n",
        svg::escape(r.fits_all_conf), verdict, format_size(r.fits_all_worst_peak), r.settings_tried);
    for (const auto& [rank, excess] : r.beyond_any_setting)
      out += fmt::format(
          "<p>Rank {}: its live bytes at its OOM exceed the capacity by {}: no setting fits it (a smaller batch "
          "there: <code>fraglab fit</code>).</p>\n",
          rank, format_size(excess));
  }
  return out;
}

}  // namespace

std::string ranks_html(const std::vector<std::pair<std::string, RanksReport>>& jobs, const std::string& command) {
  std::string out = html_page_head("fraglab ranks");
  out += "<h1>fraglab ranks</h1>\n<p>Made by <code>" + svg::escape(command) +
         "</code>. Each job's per-rank snapshots read together: peaks, OOMs and fidelity per rank, where ranks "
         "diverge, the rank that reaches the limit first and why.</p>\n";
  for (const auto& [job, report] : jobs) out += job_html(job, report, 10);
  return out + "</body></html>\n";
}

}  // namespace fraglab
