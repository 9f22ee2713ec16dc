// Timeline: requested, allocated and reserved bytes of the primary policy over event
// index or time. Each pixel column draws the min..max of the events it covers, taken
// from the run's min/max pyramids, so a frame costs O(width log n) for any trace length.
// Wheel zooms around the mouse, right-drag pans, click or drag sets the cursor.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "gui/views.h"

namespace fraglab::gui {

namespace {

constexpr float kLeftMargin = 78, kBottomMargin = 16, kTopMargin = 18;

// A peak's marker; its label sits on the plot's background color so the series' lines do not strike
// through it, and on the marker's left where it would pass the plot's right edge.
void draw_marker(ImDrawList* dl, float x, float top, float bottom, float right, ImU32 color, const std::string& label) {
  dl->AddLine({x, top}, {x, bottom}, color, 1.0f);
  dl->AddTriangleFilled({x - 4, top}, {x + 4, top}, {x, top + 6}, color);
  ImVec2 size = ImGui::CalcTextSize(label.c_str());
  float tx = x + 5 + size.x > right ? x - 5 - size.x : x + 5;
  dl->AddRectFilled({tx - 2, top}, {tx + size.x + 2, top + size.y}, IM_COL32(24, 26, 30, 230));
  dl->AddText({tx, top}, color, label.c_str());
}

void handle_input(AppState& app, ImVec2 p0, float w, double begin, double end) {
  ImGuiIO& io = ImGui::GetIO();
  bool hovered = ImGui::IsItemHovered();
  double mouse_event = static_cast<double>(column_event(app, begin, end, std::clamp(io.MousePos.x - p0.x, 0.0f, w), w));
  if (hovered && io.MouseWheel != 0) zoom_range(app, begin, end, mouse_event, std::pow(0.8, io.MouseWheel));
  if (ImGui::IsItemActive() && ImGui::IsMouseDown(ImGuiMouseButton_Left))
    app.set_cursor(static_cast<uint64_t>(mouse_event));
  if (hovered && ImGui::IsMouseDragging(ImGuiMouseButton_Right))
    pan_range(app, begin, end, -static_cast<double>(io.MouseDelta.x) / w * (end - begin));
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) app.timeline.begin = app.timeline.end = 0;
}

}  // namespace

void draw_timeline(AppState& app, ImVec2 size) {
  const PolicyRun* run = app.primary_run();
  const RunResult* result = app.primary_result();
  if (!app.trace || !run) {
    ImGui::TextDisabled("Open a trace and add a policy to see its timeline.");
    return;
  }
  if (!result) {
    if (run->state() == PolicyRun::State::Failed) {
      ImGui::TextColored({1, 0.4f, 0.4f, 1}, "%s: %s", run->spec().c_str(), run->error().c_str());
    } else {
      ImGui::Text("Replaying %s ...", run->spec().c_str());
      ImGui::ProgressBar(static_cast<float>(run->progress()), {size.x * 0.5f, 0});
    }
    return;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 origin = ImGui::GetCursorScreenPos();
  ImVec2 p0{origin.x + kLeftMargin, origin.y + kTopMargin};
  float w = std::max(10.0f, size.x - kLeftMargin - 8), h = std::max(10.0f, size.y - kTopMargin - kBottomMargin);
  const auto shown_range = visible_range(app);
  const double begin = shown_range.first, end = shown_range.second;

  // Scale to the highest value visible of any series shown.
  int64_t top = 1;
  for (int k = 0; k < kSeriesCount; ++k)
    if (app.timeline.show[k])
      top = std::max(
          top, result->pyramid[k].range(static_cast<uint64_t>(begin), static_cast<uint64_t>(std::ceil(end))).second);
  double y_scale = h / (static_cast<double>(top) * 1.08);
  auto y_of = [&](int64_t kib) { return p0.y + h - static_cast<float>(static_cast<double>(kib) * y_scale); };

  dl->AddRectFilled(p0, {p0.x + w, p0.y + h}, IM_COL32(24, 26, 30, 255));
  const ByteTicks ticks = byte_ticks(static_cast<uint64_t>(top) * 108 / 100 * 1024, 4);
  for (uint64_t v : ticks.values) {
    float y = y_of(static_cast<int64_t>(v / 1024));
    dl->AddLine({p0.x, y}, {p0.x + w, y}, IM_COL32(60, 60, 60, 255));
    dl->AddText({origin.x + 2, y - 7}, IM_COL32(170, 170, 170, 255), ticks.label(v).c_str());
  }
  // Requested as a filled area, then reserved and allocated as lines over it: where the
  // three meet, each still shows (reserved as a rim above allocated, allocated as the line
  // on top of the area), so no series hides another.
  auto columns = [&](int k, auto&& draw) {
    uint64_t next = column_event(app, begin, end, 0, w);
    for (int c = 0; c < static_cast<int>(w); ++c) {
      uint64_t first = next;
      next = column_event(app, begin, end, c + 1, w);
      auto [lo, hi] = result->pyramid[k].range(first, std::max(next, first + 1));
      draw(p0.x + static_cast<float>(c), lo, hi);
    }
  };
  if (app.timeline.show[0]) {
    ImU32 area = (series_color(Series::Requested) & 0x00ffffffu) | (110u << 24);
    columns(0, [&](float x, int64_t, int64_t hi) { dl->AddRectFilled({x, y_of(hi)}, {x + 1, p0.y + h}, area); });
  }
  if (app.timeline.show[2]) {
    ImU32 color = series_color(Series::Reserved);
    columns(2, [&](float x, int64_t lo, int64_t hi) {
      dl->AddRectFilled({x, y_of(hi) - 2}, {x + 1, y_of(lo) + 1}, color);
    });
  }
  if (app.timeline.show[1]) {
    ImU32 color = series_color(Series::Allocated);
    columns(1, [&](float x, int64_t lo, int64_t hi) {
      dl->AddRectFilled({x, y_of(hi)}, {x + 1, y_of(lo) + 1.5f}, color);
    });
  }

  auto x_of = [&](uint64_t e) { return p0.x + static_cast<float>(event_x(app, begin, end, e, w)); };
  auto visible = [&](uint64_t e) { return static_cast<double>(e) >= begin && static_cast<double>(e) < end; };
  const ReplayResult& r = result->replay;
  app.shown.set("timeline.peak_reserved", {{"bytes", r.reserved.bytes}, {"event", r.reserved.event_index}});
  app.shown.set("timeline.peak_allocated", {{"bytes", r.allocated.bytes}, {"event", r.allocated.event_index}});
  if (visible(r.reserved.event_index))
    draw_marker(dl, x_of(r.reserved.event_index), p0.y, p0.y + h, p0.x + w, series_color(Series::Reserved),
                "peak reserved " + bytes_label(r.reserved.bytes));
  if (visible(r.allocated.event_index))
    draw_marker(dl, x_of(r.allocated.event_index), p0.y + 16, p0.y + h, p0.x + w, series_color(Series::Allocated),
                "peak allocated " + bytes_label(r.allocated.bytes));
  for (const auto& oom : r.ooms)
    if (visible(oom.event_index))
      dl->AddRectFilled({x_of(oom.event_index) - 1, p0.y + h - 8}, {x_of(oom.event_index) + 1, p0.y + h},
                        IM_COL32(255, 60, 60, 255));
  if (visible(app.cursor)) {
    float x = x_of(app.cursor);
    dl->AddLine({x, p0.y - 4}, {x, p0.y + h}, IM_COL32(255, 255, 255, 230), 1.5f);
  }

  // Axis labels and the legend with the values at the cursor.
  bool by_time = app.timeline.axis == TimeAxis::Time;
  auto axis_label = [&](uint64_t e) {
    return by_time ? duration_label(app.trace->time_at(e) - app.trace->time_at(0)) : fmt::format("{}", e);
  };
  ImU32 dim = IM_COL32(170, 170, 170, 255);
  dl->AddText({p0.x, p0.y + h + 1}, dim, axis_label(static_cast<uint64_t>(begin)).c_str());
  std::string last = axis_label(static_cast<uint64_t>(std::max(begin, end - 1)));
  dl->AddText({p0.x + w - ImGui::CalcTextSize(last.c_str()).x, p0.y + h + 1}, dim, last.c_str());
  std::string mid = by_time ? "time since the first event" : "event index";
  dl->AddText({p0.x + w / 2 - ImGui::CalcTextSize(mid.c_str()).x / 2, p0.y + h + 1}, dim, mid.c_str());
  float lx = p0.x;
  std::string head = fmt::format("{}  event {}  t={}", run->spec(), app.cursor,
                                 duration_label(app.trace->time_at(app.cursor) - app.trace->time_at(0)));
  dl->AddText({lx, origin.y}, IM_COL32_WHITE, head.c_str());
  lx += ImGui::CalcTextSize(head.c_str()).x + 16;
  for (int k = 0; k < kSeriesCount; ++k) {
    std::string s =
        fmt::format("{} {}", series_name(static_cast<Series>(k)), bytes_label(result->series[k].bytes_at(app.cursor)));
    dl->AddText({lx, origin.y}, app.timeline.show[k] ? series_color(static_cast<Series>(k)) : dim, s.c_str());
    lx += ImGui::CalcTextSize(s.c_str()).x + 16;
  }

  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##timeline", {w, h});
  handle_input(app, p0, w, begin, end);
  if (ImGui::IsItemHovered()) {
    uint64_t e = column_event(app, begin, end, std::clamp(ImGui::GetIO().MousePos.x - p0.x, 0.0f, w), w);
    ImGui::BeginTooltip();
    ImGui::Text("event %llu  (%s)", static_cast<unsigned long long>(e),
                duration_label(app.trace->time_at(e) - app.trace->time_at(0)).c_str());
    for (int k = kSeriesCount - 1; k >= 0; --k)
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(series_color(static_cast<Series>(k))), "%s %s",
                         series_name(static_cast<Series>(k)), bytes_label(result->series[k].bytes_at(e)).c_str());
    ImGui::TextDisabled("click: cursor  wheel: zoom  right-drag: pan  double-click: all");
    ImGui::EndTooltip();
  }
  ImGui::SetCursorScreenPos({origin.x, origin.y + size.y});
}

}  // namespace fraglab::gui
