#include "report/compare_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "allocators/policy_options.h"
#include "allocators/registry.h"
#include "report/corpus.h"
#include "report/svg_chart.h"

namespace fraglab {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string ratio_text(double r) { return std::isnan(r) ? "n/a" : fmt::format("{:.3f}", r); }

std::string signed_size(int64_t bytes) {
  return (bytes < 0 ? "-" : "+") + format_size(static_cast<uint64_t>(bytes < 0 ? -bytes : bytes));
}

// "rmm_arena" plus, where the policy takes memory up front, what it takes (peak reserved includes it).
std::string policy_note(const CompareResults& r, size_t p) {
  std::string note = preallocation_note(r.policies[p], r.capacity);
  return note.empty() ? "" : "preallocates: " + note;
}

const char* pareto_mark(bool on_front) { return on_front ? "&#9733;" : ""; }

// The bounds present on trace t (absent ones left out).
std::vector<size_t> bound_policies(const CompareSummary& s, const std::vector<const CompareRow*>& cells, size_t t) {
  std::vector<size_t> out;
  const size_t P = s.is_bound.size();
  for (size_t p = 0; p < P; ++p)
    if (s.is_bound[p] && cells[t * P + p]) out.push_back(p);
  return out;
}

// Contenders of trace t ordered by their rank there (absent ones and bounds left out).
std::vector<size_t> ranked_policies(const CompareSummary& s, size_t t) {
  std::vector<size_t> order;
  for (Eigen::Index p = 0; p < s.rank.cols(); ++p)
    if (std::isfinite(s.rank(static_cast<Eigen::Index>(t), p))) order.push_back(static_cast<size_t>(p));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return s.rank(static_cast<Eigen::Index>(t), static_cast<Eigen::Index>(a)) <
           s.rank(static_cast<Eigen::Index>(t), static_cast<Eigen::Index>(b));
  });
  return order;
}

const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; } h3 { margin-top: 1.8em; }
table { border-collapse: collapse; margin: .6em 0; } th, td { padding: 2px 8px; border-bottom: 1px solid #eee; }
th { text-align: left; background: #f6f6f6; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f3f3f3; padding: 1px 4px; border-radius: 3px; }
.sw { display: inline-block; width: .8em; height: .8em; margin-right: .4em; vertical-align: -1px; }
.legend { display: flex; flex-wrap: wrap; gap: 2px 14px; font-size: 12px; margin: .3em 0 .8em; }
.chart .grid { stroke: #eee; } .chart .frame { fill: none; stroke: #999; }
.chart .ref { stroke: #000; stroke-dasharray: 4 3; } .chart text { font: 11px system-ui, sans-serif; fill: #444; }
.chart .axis { font-size: 12px; fill: #222; } .oom { color: #b00; font-weight: bold; }
)";

std::string swatch(size_t p) {
  return fmt::format("<span class=\"sw\" style=\"background:{}\"></span>", svg::palette(p));
}

std::string html_policy_cell(const CompareResults& r, size_t p) {
  std::string note = policy_note(r, p);
  return swatch(p) + "<code>" + svg::escape(r.policies[p]) + "</code>" +
         (note.empty() ? "" : "<br><small>" + svg::escape(note) + "</small>");
}

std::string html_summary_row(const CompareResults& r, const PolicySummary& ps, const std::string& rank) {
  return fmt::format(
      "<tr><td class=n>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{:.3f}</td><td>{}</td>"
      "<td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n{}>{}</td>"
      "<td class=n>{:.3f} s</td></tr>\n",
      rank, html_policy_cell(r, ps.policy), ratio_text(ps.geomean_ratio), ratio_text(ps.worst_ratio),
      ps.calls_per_alloc, pareto_mark(ps.pareto), std::isnan(ps.mean_rank) ? "-" : fmt::format("{:.2f}", ps.mean_rank),
      ps.bound ? "-" : std::to_string(ps.wins), ps.traces, ps.ooms ? " oom" : "", ps.ooms, ps.replay_seconds);
}

std::string html_ranking(const CompareResults& r, const CompareSummary& s) {
  const char* head =
      "<table><tr><th>rank</th><th>policy</th><th>geo. mean reserved / bound</th><th>worst</th>"
      "<th>device calls / alloc</th><th title=\"Pareto-optimal: no other policy reserves less and calls the driver "
      "less often\">Pareto</th><th>mean rank</th><th>wins</th><th>traces</th><th>OOMs</th><th>replay time</th>"
      "</tr>\n";
  std::string out = head;
  std::vector<svg::Bar> bars;
  for (size_t i = 0; i < s.ranking.size(); ++i) {
    const auto& ps = s.ranking[i];
    out += html_summary_row(r, ps, std::to_string(i + 1));
    if (!std::isnan(ps.geomean_ratio))
      bars.push_back({r.policies[ps.policy], svg::palette(ps.policy), ps.geomean_ratio,
                      fmt::format("{:.3f}x{}", ps.geomean_ratio, ps.ooms ? " (OOM)" : "")});
  }
  out += "</table>\n";
  if (!s.bounds.empty()) {
    out +=
        "<p>Bounds, not contenders: <code>passthrough</code> reserves the least memory a policy can without "
        "caching, at one cudaMalloc and one cudaFree per request (~60 µs each on an H100 against ~0.2 µs for a "
        "cached block); <code>oracle</code> plans with the whole future known.</p>\n" +
        std::string(head);
    for (const auto& ps : s.bounds) out += html_summary_row(r, ps, "bound");
    out += "</table>\n";
  }
  out += svg::bar_chart(bars, "geometric mean of peak reserved / live-bytes bound", 1.0, "bound");
  return out;
}

std::string html_trace(const CompareResults& r, const CompareSummary& s, const std::vector<const CompareRow*>& cells,
                       size_t t) {
  const size_t P = r.policies.size();
  const CompareRow* any = nullptr;
  for (size_t p = 0; p < P && !any; ++p) any = cells[t * P + p];
  std::string name = trace_display_name(r.traces[t]);
  std::string out =
      fmt::format("<h3 id=\"t{}\">{}</h3>\n<p><code>{}</code>", t, svg::escape(name), svg::escape(r.traces[t]));
  if (!any) return out + ": no results in these shards.</p>\n";
  out += fmt::format(": {} replay events, live-bytes bound {}", any->events, format_size(any->live_bytes_bound));
  if (any->recorded_peak_reserved)
    out += fmt::format(", recorded allocator's peak reserved {}", format_size(any->recorded_peak_reserved));
  out += ".</p>\n";

  std::vector<svg::Series> lines;
  std::vector<svg::Bar> bars;
  std::string legend = "<div class=\"legend\">";
  std::vector<size_t> shown = ranked_policies(s, t);
  for (size_t p : bound_policies(s, cells, t)) shown.push_back(p);
  for (size_t p : shown) {
    const CompareRow* row = cells[t * P + p];
    svg::Series line{r.policies[p], svg::palette(p), {}, {}};
    for (size_t i = 0; i < row->series_event.size(); ++i) {
      line.x.push_back(static_cast<double>(row->series_event[i]));
      line.y.push_back(static_cast<double>(row->series_reserved[i]) / kGiB);
    }
    lines.push_back(std::move(line));
    bars.push_back({r.policies[p], svg::palette(p), static_cast<double>(row->peak_reserved) / kGiB,
                    fmt::format("{}{}", format_size(row->peak_reserved), row->ooms ? " OOM" : "")});
    legend += swatch(p) + svg::escape(r.policies[p]) + " ";
  }
  legend += "</div>\n";
  double bound = static_cast<double>(any->live_bytes_bound) / kGiB;
  out += "<p>Reserved memory over the replay (highest point per 1/" + std::to_string(kSeriesPoints) +
         " of the events):</p>\n" + legend;
  out += svg::line_chart(lines, "trace event", "reserved (GiB)", bound, "live-bytes bound");
  out += "<p>Peak reserved per policy:</p>\n" + svg::bar_chart(bars, "peak reserved (GiB)", bound, "bound");
  out +=
      "<table><tr><th>rank</th><th>policy</th><th>peak reserved</th><th>device calls / alloc</th><th>Pareto</th>"
      "<th>peak allocated</th><th>reserved / bound</th><th>gap to bound</th><th>fragmentation at peak</th>"
      "<th>device calls</th><th>OOMs</th><th>replay time</th></tr>\n";
  auto row_html = [&](size_t p, const std::string& rank) {
    const CompareRow* row = cells[t * P + p];
    return fmt::format(
        "<tr><td class=n>{}</td><td>{}</td><td class=n>{}</td><td class=n>{:.3f}</td><td>{}</td><td class=n>{}</td>"
        "<td class=n>{}</td><td class=n>{}</td><td class=n>{:.3f}</td><td class=n>{}</td><td class=n{}>{}</td>"
        "<td class=n>{:.3f} s</td></tr>\n",
        rank, html_policy_cell(r, p), format_size(row->peak_reserved), calls_per_alloc(*row),
        pareto_mark(s.pareto(static_cast<Eigen::Index>(t), static_cast<Eigen::Index>(p)) != 0),
        format_size(row->peak_allocated), ratio_text(row->reserved_over_bound()), signed_size(row->gap_bytes()),
        row->fragmentation_at_peak(), row->device_calls(), row->ooms ? " oom" : "", row->ooms, row->replay_seconds);
  };
  for (size_t p : ranked_policies(s, t))
    out += row_html(p, fmt::format("{:g}", s.rank(static_cast<Eigen::Index>(t), static_cast<Eigen::Index>(p))));
  for (size_t p : bound_policies(s, cells, t)) out += row_html(p, "bound");
  return out + "</table>\n";
}

}  // namespace

std::string html_report(const CompareResults& r, const CompareSummary& s, const std::string& command) {
  auto cells = r.cell_table();
  std::string out =
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>fraglab compare</title>\n<style>";
  out += kStyle;
  out += "</style></head><body>\n";
  out += fmt::format("<h1>fraglab compare: {} traces &times; {} policy configurations</h1>\n", r.traces.size(),
                     r.policies.size());
  out += fmt::format(
      "<p>Made by <code>{}</code>{}. Simulated device{}; peak reserved is compared with the live-bytes "
      "bound (the most bytes the program held at once: no allocator can reserve less).</p>\n",
      svg::escape(command), r.shard ? fmt::format(" (shard {}/{})", r.shard->index, r.shard->count) : "",
      r.capacity ? " of " + format_size(*r.capacity) + " (allocations that do not fit are skipped and counted as OOMs)"
                 : " without a capacity limit");
  out += "<h2>Ranking</h2>\n" + html_ranking(r, s);
  out +=
      "<h2>Traces</h2>\n<p>The best policy of each trace is its best contender (bounds left out).</p>\n"
      "<table><tr><th>trace</th><th>live-bytes bound</th><th>recorded peak</th><th>best policy</th>"
      "<th>its peak reserved</th><th>reserved / bound</th><th>its device calls / alloc</th></tr>\n";
  for (size_t t = 0; t < r.traces.size(); ++t) {
    auto order = ranked_policies(s, t);
    if (order.empty()) continue;
    const CompareRow* best = cells[t * r.policies.size() + order[0]];
    out += fmt::format(
        "<tr><td><a href=\"#t{}\">{}</a></td><td class=n>{}</td><td class=n>{}</td><td><code>{}</code></td>"
        "<td class=n>{}</td><td class=n>{}</td><td class=n>{:.3f}</td></tr>\n",
        t, svg::escape(trace_display_name(r.traces[t])), format_size(best->live_bytes_bound),
        best->recorded_peak_reserved ? format_size(best->recorded_peak_reserved) : "-",
        svg::escape(r.policies[order[0]]), format_size(best->peak_reserved), ratio_text(best->reserved_over_bound()),
        calls_per_alloc(*best));
  }
  out += "</table>\n";
  for (size_t t = 0; t < r.traces.size(); ++t) out += html_trace(r, s, cells, t);
  return out + "</body></html>\n";
}

std::string markdown_report(const CompareResults& r, const CompareSummary& s, const std::string& command) {
  auto cells = r.cell_table();
  const size_t P = r.policies.size();
  std::string out = fmt::format("# fraglab compare: {} traces x {} policy configurations\n\n", r.traces.size(), P);
  out += fmt::format("Made by `{}`{}; simulated device {}.\n\n", command,
                     r.shard ? fmt::format(" (shard {}/{})", r.shard->index, r.shard->count) : "",
                     r.capacity ? "of " + format_size(*r.capacity) : "without a capacity limit");
  out +=
      "## Ranking\n\nGeometric mean over the traces of peak reserved / live-bytes bound (1.000 = no overhead); "
      "per-trace ranks by peak reserved, runs with OOMs last. Device calls per allocation sit beside it: a driver "
      "call costs ~60 µs on an H100 against ~0.2 µs for a cached block. ★ marks the Pareto front of memory against "
      "device calls (no other policy reserves less and calls the driver less often). Policies that take memory "
      "up front say so; their peak reserved includes it.\n\n";
  const char* head =
      "| rank | policy | geo. mean reserved/bound | worst | device calls / alloc | Pareto | mean rank | wins | "
      "OOMs | replay time |\n| ---: | --- | ---: | ---: | ---: | :---: | ---: | ---: | ---: | ---: |\n";
  auto summary_row = [&](const PolicySummary& ps, const std::string& rank) {
    std::string note = policy_note(r, ps.policy);
    return fmt::format("| {} | `{}`{} | {} | {} | {:.3f} | {} | {} | {} | {} | {:.2f} s |\n", rank,
                       r.policies[ps.policy], note.empty() ? "" : " (" + note + ")", ratio_text(ps.geomean_ratio),
                       ratio_text(ps.worst_ratio), ps.calls_per_alloc, ps.pareto ? "★" : "",
                       std::isnan(ps.mean_rank) ? "-" : fmt::format("{:.2f}", ps.mean_rank),
                       ps.bound ? "-" : std::to_string(ps.wins), ps.ooms, ps.replay_seconds);
  };
  out += head;
  for (size_t i = 0; i < s.ranking.size(); ++i) out += summary_row(s.ranking[i], std::to_string(i + 1));
  if (!s.bounds.empty()) {
    out +=
        "\nBounds, not contenders: `passthrough` reserves the least memory a policy can without caching, at one "
        "cudaMalloc and one cudaFree per request; `oracle` plans with the whole future known.\n\n";
    out += head;
    for (const auto& ps : s.bounds) out += summary_row(ps, "bound");
  }
  out +=
      "\n## Per trace\n\nBest and worst among the contenders (bounds left out).\n\n"
      "| trace | live-bytes bound | recorded peak | best policy | its peak reserved | reserved/bound |"
      " its device calls / alloc | worst policy | its peak reserved |\n"
      "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |\n";
  for (size_t t = 0; t < r.traces.size(); ++t) {
    auto order = ranked_policies(s, t);
    if (order.empty()) continue;
    const CompareRow* best = cells[t * P + order.front()];
    const CompareRow* worst = cells[t * P + order.back()];
    out += fmt::format("| {} | {} | {} | `{}` | {} | {} | {:.3f} | `{}` | {} |\n", trace_display_name(r.traces[t]),
                       format_size(best->live_bytes_bound),
                       best->recorded_peak_reserved ? format_size(best->recorded_peak_reserved) : "-",
                       r.policies[order.front()], format_size(best->peak_reserved),
                       ratio_text(best->reserved_over_bound()), calls_per_alloc(*best), r.policies[order.back()],
                       format_size(worst->peak_reserved));
  }
  out += "\n## Peak reserved / live-bytes bound, every cell\n\n| policy |";
  std::string rule = "| --- |";
  for (const auto& trace : r.traces) out += " " + trace_display_name(trace) + " |", rule += " ---: |";
  out += "\n" + rule + "\n";
  std::vector<PolicySummary> rows = s.ranking;
  rows.insert(rows.end(), s.bounds.begin(), s.bounds.end());
  for (const auto& ps : rows) {
    out += "| `" + r.policies[ps.policy] + "`" + (ps.bound ? " (bound)" : "") + " |";
    for (size_t t = 0; t < r.traces.size(); ++t) {
      const CompareRow* row = cells[t * P + ps.policy];
      out += row ? fmt::format(" {}{} |", ratio_text(row->reserved_over_bound()), row->ooms ? " (OOM)" : "") : " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace fraglab
