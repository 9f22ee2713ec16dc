// Two traces side by side (fraglab-gui A B), at the top of the compare view: `fraglab
// diff`'s comparison (report/trace_diff.h) and both traces' reserved bytes under the
// selected policy, the second's timeline aligned with the first's by time, by step (the
// loop's period, gui/model/trace_pair.h) or by event position.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "gui/views.h"

namespace fraglab::gui {

namespace {

constexpr ImU32 kColorA = IM_COL32(250, 160, 60, 255), kColorB = IM_COL32(80, 200, 230, 255);

std::string file_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void pair_plot(AppState& app, const TracePairRun::Result* steps, ImVec2 size) {
  const RunResult* ra = app.primary_result();
  const RunResult* rb = app.other_run ? app.other_run->result() : nullptr;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 origin = ImGui::GetCursorScreenPos();
  const float left = 78;
  ImVec2 p0{origin.x + left, origin.y + 16};
  float w = std::max(10.0f, size.x - left - 8), h = std::max(10.0f, size.y - 20);
  ImGui::Dummy(size);
  if (!ra || !rb || (app.align == Align::Step && !steps)) {
    dl->AddText(origin, IM_COL32(170, 170, 170, 255), "replaying both traces ...");
    return;
  }
  const auto shown_range = visible_range(app);
  const double begin = shown_range.first, end = shown_range.second;
  Alignment al{app.align, app.trace.get(), app.other.get(), steps ? &steps->steps_a : nullptr,
               steps ? &steps->steps_b : nullptr};
  // Allocated bytes show the loop (what the alignment lines up), reserved bytes the cost.
  const int kAllocated = static_cast<int>(Series::Allocated), kReserved = static_cast<int>(Series::Reserved);
  // One column's events in A, and where they fall in B: [series][trace] = {lo, hi}.
  struct Column {
    std::pair<int64_t, int64_t> v[2][2];
  };
  std::vector<Column> cols(static_cast<size_t>(w));
  int64_t top = 1;
  uint64_t next = column_event(app, begin, end, 0, w);
  for (size_t c = 0; c < cols.size(); ++c) {
    uint64_t first = next;
    next = column_event(app, begin, end, static_cast<double>(c + 1), w);
    uint64_t last = std::max(next, first + 1);
    uint64_t b0 = al.to_b(first), b1 = std::max(al.to_b(last), b0 + 1);
    for (int k : {0, 1}) {
      int series = k == 0 ? kAllocated : kReserved;
      cols[c].v[k][0] = ra->pyramid[series].range(first, last);
      cols[c].v[k][1] = rb->pyramid[series].range(b0, b1);
      top = std::max({top, cols[c].v[k][0].second, cols[c].v[k][1].second});
    }
  }
  double scale = h / (static_cast<double>(top) * 1.08);
  auto y_of = [&](int64_t kib) { return p0.y + h - static_cast<float>(static_cast<double>(kib) * scale); };
  dl->AddRectFilled(p0, {p0.x + w, p0.y + h}, IM_COL32(24, 26, 30, 255));
  auto dimmed = [](ImU32 c) { return (c & 0x00ffffffu) | (120u << 24); };
  for (size_t c = 0; c < cols.size(); ++c) {
    float x = p0.x + static_cast<float>(c);
    for (int t : {0, 1}) {
      ImU32 color = t == 0 ? kColorA : kColorB;
      auto [lo, hi] = cols[c].v[0][t];
      dl->AddRectFilled({x, y_of(hi)}, {x + 1, y_of(lo) + 1}, dimmed(color));  // allocated
      auto [rlo, rhi] = cols[c].v[1][t];
      dl->AddRectFilled({x, y_of(rhi) - (t == 0 ? 1.0f : 0.0f)}, {x + 1, y_of(rlo) + 1}, color);  // reserved
    }
  }
  // Step boundaries of A (the alignment's anchors when aligned by step).
  if (steps && app.align == Align::Step)
    for (uint64_t s : steps->steps_a)
      if (static_cast<double>(s) >= begin && static_cast<double>(s) < end) {
        float x = p0.x + static_cast<float>(event_x(app, begin, end, s, w));
        dl->AddLine({x, p0.y + h - 6}, {x, p0.y + h}, IM_COL32(200, 200, 200, 255));
      }
  if (static_cast<double>(app.cursor) >= begin && static_cast<double>(app.cursor) < end) {
    float x = p0.x + static_cast<float>(event_x(app, begin, end, app.cursor, w));
    dl->AddLine({x, p0.y}, {x, p0.y + h}, IM_COL32(255, 255, 255, 230), 1.5f);
  }
  ImU32 dim = IM_COL32(170, 170, 170, 255);
  dl->AddText({origin.x + 2, p0.y}, dim, bytes_label(ByteSeries::to_bytes(static_cast<uint32_t>(top))).c_str());
  std::string head = fmt::format("under {}:  A peak reserved {}   B peak reserved {}", app.primary_run()->spec(),
                                 bytes_label(ra->replay.reserved.bytes), bytes_label(rb->replay.reserved.bytes));
  dl->AddText(origin, IM_COL32_WHITE, head.c_str());
}

void summary_rows(const TraceDiff& d) {
  if (!ImGui::BeginTable("##pairsum", 4,
                         ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit))
    return;
  ImGui::TableSetupColumn("");
  ImGui::TableSetupColumn("A");
  ImGui::TableSetupColumn("B");
  ImGui::TableSetupColumn("B - A");
  ImGui::TableHeadersRow();
  auto bytes_row = [](const char* name, uint64_t a, uint64_t b) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(name);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(a).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(b).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(signed_bytes_label(static_cast<int64_t>(b) - static_cast<int64_t>(a)).c_str());
  };
  auto count_row = [](const char* name, uint64_t a, uint64_t b) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(name);
    ImGui::TableNextColumn();
    ImGui::Text("%llu", static_cast<unsigned long long>(a));
    ImGui::TableNextColumn();
    ImGui::Text("%llu", static_cast<unsigned long long>(b));
    ImGui::TableNextColumn();
    ImGui::Text("%+lld", static_cast<long long>(b) - static_cast<long long>(a));
  };
  count_row("events", d.a.events, d.b.events);
  count_row("allocations", d.a.allocs, d.b.allocs);
  bytes_row("bytes requested", d.a.total_requested, d.b.total_requested);
  bytes_row("peak live (requested)", d.a.live_bytes_bound, d.b.live_bytes_bound);
  bytes_row("recorded peak reserved", d.a.recorded_peak_reserved, d.b.recorded_peak_reserved);
  bytes_row(("peak reserved, " + d.policy).c_str(), d.a.peak_reserved, d.b.peak_reserved);
  bytes_row("free inside reserved at the peak", d.a.at_peak.free_bytes, d.b.at_peak.free_bytes);
  count_row("recorded device calls", d.a.recorded_device_calls, d.b.recorded_device_calls);
  count_row("OOMs in the replay", d.a.ooms, d.b.ooms);
  ImGui::EndTable();
}

void group_table(const char* title, const std::vector<GroupDiff>& groups, size_t most) {
  if (groups.empty()) return;
  ImGui::TextDisabled("%s, largest difference first", title);
  if (!ImGui::BeginTable(title, 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) return;
  for (const char* c : {"live at peak A", "B", "B - A", "bytes B - A", "group"}) ImGui::TableSetupColumn(c);
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < groups.size() && i < most; ++i) {
    const GroupDiff& g = groups[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(g.a.live_at_peak).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(g.b.live_at_peak).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(signed_bytes_label(g.delta_live_at_peak()).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(signed_bytes_label(g.delta_bytes()).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(g.key.c_str());
  }
  ImGui::EndTable();
}

}  // namespace

void draw_trace_pair(AppState& app, ImVec2 size) {
  if (!app.other || !app.trace) {
    if (!app.other_error.empty()) {
      ImGui::TextColored({1, 0.4f, 0.4f, 1}, "%s", app.other_error.c_str());
    } else {
      ImGui::Text("loading %s ...", app.other ? app.loading_path().c_str() : app.second_path.c_str());
    }
    return;
  }
  auto result = app.pair ? app.pair->result() : nullptr;
  ImGui::AlignTextToFramePadding();
  ImGui::Text("A %s (%llu events%s)  vs  B %s (%llu events%s)   align by", file_name(app.trace->path).c_str(),
              static_cast<unsigned long long>(app.trace->events()),
              result ? fmt::format(", {} steps", result->steps_a.size()).c_str() : "",
              file_name(app.other->path).c_str(), static_cast<unsigned long long>(app.other->events()),
              result ? fmt::format(", {} steps", result->steps_b.size()).c_str() : "");
  for (int a = 0; a < 3; ++a) {
    ImGui::SameLine();
    if (ImGui::RadioButton(kAlignNames[a], app.align == static_cast<Align>(a))) app.align = static_cast<Align>(a);
  }
  if (result) {
    ImGui::SameLine(0, 16);
    ImGui::TextDisabled("steps: %s", result->steps_how.c_str());
  }
  // The plot's legend: which color is which trace, lines reserved, areas allocated.
  ImDrawList* dl = ImGui::GetWindowDrawList();
  auto key = [&](ImU32 color, bool line, const std::string& label) {
    ImVec2 p = ImGui::GetCursorScreenPos();
    float s = ImGui::GetTextLineHeight();
    if (line)
      dl->AddRectFilled({p.x, p.y + s / 2 - 1}, {p.x + 16, p.y + s / 2 + 1}, color);
    else
      dl->AddRectFilled({p.x, p.y + 3}, {p.x + 16, p.y + s - 3}, (color & 0x00ffffffu) | (120u << 24));
    ImGui::Dummy({18, s});
    ImGui::SameLine(0, 3);
    ImGui::TextUnformatted(label.c_str());
    ImGui::SameLine(0, 14);
  };
  key(kColorA, true, "A reserved");
  key(kColorA, false, "A allocated");
  key(kColorB, true, "B reserved");
  key(kColorB, false, "B allocated");
  ImGui::TextDisabled("B's events placed under A's by %s", kAlignNames[static_cast<int>(app.align)]);
  pair_plot(app, result.get(), {size.x, std::max(90.0f, size.y * 0.3f)});
  if (app.pair && !app.pair->error().empty()) {
    ImGui::TextColored({1, 0.4f, 0.4f, 1}, "diff: %s", app.pair->error().c_str());
    return;
  }
  if (!result || !result->diff) {
    ImGui::TextDisabled("fraglab diff: replaying both traces ...");
    return;
  }
  const TraceDiff& d = *result->diff;
  ImGui::BeginChild("##pairsum", {std::min(600.0f, size.x * 0.48f), 0}, false);
  summary_rows(d);
  group_table("by size class", d.by_size_class, 10);
  group_table("by stream", d.by_stream, 4);
  group_table("by category (inferred)", d.by_category, 8);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("##pairsites", {0, 0}, false);
  group_table("by call site", d.by_site, 30);
  ImGui::EndChild();
}

}  // namespace fraglab::gui
