// Trace summary, independent of any policy: counts, the size and lifetime distributions
// (log2 histograms from traces/trace_stats.h) and the allocation sites with the most bytes.
#include <fmt/core.h>

#include <algorithm>

#include "allocators/pytorch/config.h"
#include "gui/model/palette.h"
#include "gui/views.h"

namespace fraglab::gui {

namespace {

void log2_histogram(const char* id, const Distribution& d, bool as_bytes, float width) {
  int lo = 64, hi = -1;
  for (int k = 0; k < 64; ++k)
    if (d.log2_buckets[static_cast<size_t>(k)]) {
      lo = std::min(lo, k);
      hi = k;
    }
  if (hi < 0) {
    ImGui::TextDisabled("none");
    return;
  }
  std::vector<float> values;
  for (int k = lo; k <= hi; ++k) values.push_back(static_cast<float>(d.log2_buckets[static_cast<size_t>(k)]));
  auto label = [&](int k) { return as_bytes ? bytes_label(uint64_t{1} << k) : fmt::format("{}", uint64_t{1} << k); };
  std::string overlay = fmt::format("{} .. {} (log2 buckets)", label(lo), label(hi + 1));
  ImGui::PlotHistogram(id, values.data(), static_cast<int>(values.size()), 0, overlay.c_str(), 0, FLT_MAX, {width, 90});
  auto value = [&](double v) { return as_bytes ? bytes_label(static_cast<uint64_t>(v)) : fmt::format("{:.0f}", v); };
  ImGui::TextDisabled("p50 %s   p90 %s   p99 %s   max %s", value(d.p50).c_str(), value(d.p90).c_str(),
                      value(d.p99).c_str(), value(d.max).c_str());
}

}  // namespace

void draw_summary(AppState& app, ImVec2 size) {
  if (!app.trace) {
    ImGui::TextDisabled("No trace loaded.");
    return;
  }
  const TraceInfo& info = *app.trace;
  const TraceStats& s = info.stats;
  float half = size.x / 2 - 12;
  ImGui::BeginChild("##sumleft", {half, size.y}, false);
  ImGui::Text("%s", info.path.c_str());
  ImGui::TextDisabled("%s, %llu events over %s", info.trace.meta.format.c_str(),
                      static_cast<unsigned long long>(s.events), duration_label(s.time_span_us()).c_str());
  ImGui::Text("allocs %llu   frees %llu   empty_cache %llu   streams %llu",
              static_cast<unsigned long long>(s.by_kind[static_cast<size_t>(EventKind::Alloc)]),
              static_cast<unsigned long long>(s.by_kind[static_cast<size_t>(EventKind::Free)]),
              static_cast<unsigned long long>(s.by_kind[static_cast<size_t>(EventKind::EmptyCache)]),
              static_cast<unsigned long long>(s.streams_used));
  ImGui::Text("peak live requested %s at event %llu (the bound for reserved)",
              bytes_label(s.peak_live_requested).c_str(), static_cast<unsigned long long>(s.peak_live_index));
  ImGui::Text("total requested %s   never freed %llu", bytes_label(s.total_requested).c_str(),
              static_cast<unsigned long long>(s.never_freed));
  if (s.recorded_peak_reserved)
    ImGui::Text("recording allocator's peak reserved %s", bytes_label(s.recorded_peak_reserved).c_str());
  // The settings the pytorch policy starts from: recorded, or read from the recording (the snapshot had none).
  const TraceMeta& meta = info.trace.meta;
  if (auto conf = detail::recorded_conf(meta.allocator_settings))
    ImGui::TextWrapped("%s %s='%s'", meta.settings_inferred ? "inferred (the snapshot records none)" : "recorded with",
                       conf.variable, conf.text->c_str());
  ImGui::Spacing();
  ImGui::Text("Allocation sizes");
  log2_histogram("##sizes", s.sizes, true, half - 8);
  ImGui::Text("Lifetimes (events from alloc to free)");
  log2_histogram("##life", s.lifetimes_events, false, half - 8);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("##sumright", {half, size.y}, false);
  ImGui::Text("Top allocation sites by bytes%s", info.has_stacks ? "" : " (this trace has no stacks)");
  if (ImGui::BeginTable("##sites", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollY,
                        {half, size.y - 24})) {
    ImGui::TableSetupColumn("");
    ImGui::TableSetupColumn("bytes");
    ImGui::TableSetupColumn("allocs");
    ImGui::TableSetupColumn("site", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < info.sites.size() && i < 40; ++i) {
      const AllocSite& site = info.sites[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      uint32_t color = site_color(info, static_cast<uint32_t>(i));
      ImVec2 p = ImGui::GetCursorScreenPos();
      ImGui::GetWindowDrawList()->AddRectFilled({p.x, p.y + 2}, {p.x + 10, p.y + 12}, color);
      ImGui::Dummy({10, 12});
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bytes_label(site.bytes).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%llu", static_cast<unsigned long long>(site.count));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(site.label.c_str());
    }
    ImGui::EndTable();
  }
  ImGui::EndChild();
}

}  // namespace fraglab::gui
