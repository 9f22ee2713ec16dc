#include "report/diagnose_html.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "allocators/policy_options.h"
#include "report/alloc_groups.h"
#include "report/svg_chart.h"

namespace fraglab {

namespace {

constexpr size_t kMaxRows = 150;  // segments drawn per moment; the ones with free bytes first
constexpr int kLabelWidth = 230, kBarWidth = 760, kRowHeight = 14, kGap = 3;

const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1060px; color: #222; padding: 0 1em; }
h1 { font-size: 1.4em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; } th, td { padding: 2px 8px; border-bottom: 1px solid #eee; }
th { text-align: left; background: #f6f6f6; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f3f3f3; padding: 1px 4px; border-radius: 3px; } .verdict { background: #fff6d6; padding: .6em 1em; }
.map text { font: 11px ui-monospace, monospace; fill: #333; } .sw { display: inline-block; width: .8em; height: .8em; margin-right: .3em; }
)";

std::string shares_table(const std::vector<ByteShare>& shares, const char* what, size_t top) {
  std::string out = fmt::format("<table><tr><th>{}</th><th>bytes</th><th>count</th><th>largest</th></tr>\n", what);
  for (size_t k = 0; k < shares.size() && k < top; ++k)
    out += fmt::format("<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td></tr>\n",
                       svg::escape(shares[k].key), format_size(shares[k].bytes), shares[k].count,
                       format_size(shares[k].largest));
  return out + "</table>\n";
}

std::string live_table(const std::vector<LiveShare>& shares, const std::string& what, size_t top) {
  std::string out = fmt::format(
      "<table><tr><th>{}</th><th>live bytes</th><th>tensors</th><th>largest</th><th>"
      "categories</th></tr>\n",
      svg::escape(what));
  for (size_t k = 0; k < shares.size() && k < top; ++k) {
    std::string cats;
    for (size_t c = 0; c < shares[k].categories.size() && c < 3; ++c)
      cats += fmt::format("{}{} {}", c ? ", " : "", shares[k].categories[c].first,
                          format_size(shares[k].categories[c].second));
    std::string key = svg::escape(shares[k].key);
    if (!shares[k].detail.empty()) key += "<br><small>" + svg::escape(shares[k].detail) + "</small>";
    out +=
        fmt::format("<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td></tr>\n", key,
                    format_size(shares[k].bytes), shares[k].count, format_size(shares[k].largest), svg::escape(cats));
  }
  return out + "</table>\n";
}

// Who holds the live memory there: by the user's line, category, step and phase.
std::string holders_html(const Diagnosis& d) {
  const LiveAttribution& l = d.live;
  std::string out = fmt::format("<h3>Who holds the {} live</h3>\n", format_size(l.live_bytes));
  if (!d.request_site.empty())
    out += "<p>The request came from <code>" + svg::escape(d.request_site) + "</code>.</p>\n";
  out += "<p>Categories inferred from " + svg::escape(l.inferred_from) + ".</p>\n";
  out += live_table(l.by_site, l.by_stacks ? "line of your code" : "size class (no stacks recorded)", 12);
  out += live_table(l.by_category, "category", 8) + live_table(l.by_phase, "step and phase", 8);
  return out;
}

// The block map: one row per segment, live blocks coloured by their group, free ranges white,
// unmapped parts of virtual ranges grey; segments that could have served the request framed red.
std::string block_map(const Diagnosis& d, const Trace& trace, std::map<std::string, size_t>& colors) {
  const MemoryState& st = d.state;
  GroupLabels labels(trace.meta);
  GroupBy by = d.by_site ? GroupBy::Site : GroupBy::SizeClass;
  std::vector<uint32_t> rows;
  for (const auto& c : d.could_serve) rows.push_back(c.segment);
  std::vector<uint32_t> rest(st.segments.size());
  for (uint32_t i = 0; i < rest.size(); ++i) rest[i] = i;
  std::stable_sort(rest.begin(), rest.end(),
                   [&](uint32_t a, uint32_t b) { return st.segments[a].free_bytes > st.segments[b].free_bytes; });
  for (uint32_t i : rest)
    if (rows.size() < kMaxRows && std::find(rows.begin(), rows.end(), i) == rows.end()) rows.push_back(i);
  std::sort(rows.begin(), rows.end());  // address order, as memory lies
  int height = static_cast<int>(rows.size()) * (kRowHeight + kGap) + 4;
  std::string svg = fmt::format("<svg class=\"map\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">\n",
                                kLabelWidth + kBarWidth + 10, height);
  int y = 2;
  for (uint32_t i : rows) {
    const StateSegment& s = st.segments[i];
    bool framed =
        std::any_of(d.could_serve.begin(), d.could_serve.end(), [&](const PinnedSegment& c) { return c.segment == i; });
    auto x = [&](Addr a) {
      return kLabelWidth + static_cast<double>(a - s.addr) * kBarWidth / static_cast<double>(s.size);
    };
    svg += fmt::format("<text x=\"0\" y=\"{}\">{} {}</text>\n", y + kRowHeight - 3, s.kind, format_size(s.size));
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#d8d8d8\"><title>unmapped</title></rect>\n",
        kLabelWidth, y, kBarWidth, kRowHeight);
    for (const FreeRange& f : s.free_ranges)
      svg += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"#fff\"><title>free {}</title></rect>\n",
          x(f.addr), y, std::max(0.5, x(f.addr + f.size) - x(f.addr)), kRowHeight, format_size(f.size));
    for (uint32_t b : s.blocks) {
      const StateBlock& blk = st.blocks[b];
      std::string label = labels.label(by, trace.events[blk.alloc_index]);
      size_t color = colors.emplace(label, colors.size()).first->second;
      svg += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>{} ({}), "
          "allocated at event {}</title></rect>\n",
          x(blk.addr), y, std::max(0.5, x(blk.addr + blk.size) - x(blk.addr)), kRowHeight, svg::palette(color),
          svg::escape(label), format_size(blk.size), blk.alloc_index);
    }
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"/>\n",
        kLabelWidth, y, kBarWidth, kRowHeight, framed ? "#d00" : "#999", framed ? 2 : 0.5);
    y += kRowHeight + kGap;
  }
  svg += "</svg>\n";
  if (rows.size() < st.segments.size())
    svg += fmt::format("<p>{} of {} segments drawn (the framed ones and those with the most free bytes).</p>\n",
                       rows.size(), st.segments.size());
  return svg;
}

std::string moment_html(const Diagnosis& d, const DiagnoseReport& r, const Trace& trace) {
  const MemoryState& st = d.state;
  std::string title = d.request_bytes ? fmt::format("OOM at event {}: request {} on {}", d.event_index,
                                                    format_size(d.request_bytes), stream_label(trace.meta, d.stream))
                                      : fmt::format("State before event {}", d.event_index);
  std::string out = "<h2>" + svg::escape(title) + "</h2>\n<table>\n";
  auto row = [&](const std::string& k, const std::string& v) {
    out += "<tr><th>" + k + "</th><td class=n>" + v + "</td></tr>\n";
  };
  row("reserved", format_size(st.reserved));
  row("allocated (requested)", format_size(st.allocated) + " (" + format_size(st.requested) + ")");
  row("rounding waste", format_size(d.rounding_waste));
  row("free inside reserved", format_size(st.free_bytes));
  row("largest free range", format_size(st.largest_free));
  if (r.capacity) row("capacity", format_size(*r.capacity));
  out += "</table>\n";
  out +=
      shares_table(d.free_by_kind, "free by segment kind", 10) + shares_table(d.free_by_stream, "free by stream", 10);
  if (!d.free_by_pool.empty()) out += shares_table(d.free_by_pool, "free by pool", 10);
  out += holders_html(d);
  out += shares_table(
      d.stranded_by,
      d.by_site ? "stranded free bytes by pinning call site" : "stranded free bytes by pinning size class", 15);
  std::map<std::string, size_t> colors;
  std::string map = block_map(d, trace, colors);
  out +=
      "<p>Block map (one row per segment, address order; white = free, grey = unmapped, red frame = its free "
      "bytes would serve the request as one range):</p>\n<div>";
  std::vector<std::pair<size_t, std::string>> legend;
  for (const auto& [label, k] : colors) legend.emplace_back(k, label);
  std::sort(legend.begin(), legend.end());
  for (size_t k = 0; k < legend.size() && k < 20; ++k)
    out += fmt::format("<span><span class=\"sw\" style=\"background:{}\"></span>{}</span> &nbsp; ",
                       svg::palette(legend[k].first), svg::escape(legend[k].second));
  return out + "</div>\n" + map;
}

}  // namespace

std::string html_page_head(const std::string& title) {
  return "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + svg::escape(title) +
         "</title>\n<style>" + kStyle + "</style></head><body>\n";
}

std::string diagnose_html(const DiagnoseReport& r, const Trace& trace, const std::string& command) {
  std::string out = html_page_head("fraglab diagnose");
  out += "<h1>fraglab diagnose: " + svg::escape(r.trace) + "</h1>\n";
  out += "<p>Made by <code>" + svg::escape(command) + "</code>. Policy <code>" + svg::escape(r.policy) + "</code> on " +
         (r.capacity ? "a simulated device of " + format_size(*r.capacity)
                     : std::string("an unlimited simulated device")) +
         "; live-bytes bound " + format_size(r.live_bytes_bound) + ".</p>\n";
  if (!r.note.empty()) out += "<p>" + svg::escape(r.note) + "</p>\n";
  out += "<p class=\"verdict\"><b>Verdict:</b> " + svg::escape(r.verdict.text) + "</p>\n";
  if (r.verdict.fit) {  // the batch what-if from the probes (fraglab fit)
    out += "<table><tr><th>setting</th><th>largest batch that fits</th><th>predicted peak reserved there</th></tr>\n";
    for (const SettingAnswer& a : r.verdict.fit->answers) {
      uint64_t peak = 0;
      for (const BatchPoint& p : a.points)
        if (p.batch == a.largest_batch) peak = p.peak_reserved;
      out += fmt::format("<tr><td>{} <code>{}</code></td><td class=n>{}</td><td class=n>{}</td></tr>\n",
                         svg::escape(a.label), svg::escape(a.conf.empty() ? "(every default)" : a.conf),
                         a.largest_batch, format_size(peak));
    }
    out += "</table>\n<p>Confidence: " + svg::escape(r.verdict.fit->confidence) + ".</p>\n";
  }
  for (const auto& d : r.ooms) out += moment_html(d, r, trace);
  return out + "</body></html>\n";
}

}  // namespace fraglab
