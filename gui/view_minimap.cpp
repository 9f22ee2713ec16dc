// The minimap (brush) under the timeline: the whole trace's reserved bytes (the selected lane) in one
// strip, the timeline's visible range boxed. Drag across it to show that range (a brush, as MemoryViz's
// overview), click to center the visible range there, double-click to show everything.
#include <algorithm>

#include "gui/views.h"

namespace fraglab::gui {

void draw_minimap(AppState& app, ImVec2 size) {
  const RunResult* result = app.primary_result();
  if (!app.trace || !result || app.trace->events() == 0) {
    ImGui::Dummy(size);
    return;
  }
  const float left = 78;
  ImVec2 origin = ImGui::GetCursorScreenPos();
  ImVec2 p0{origin.x + left, origin.y + 2};
  float w = std::max(16.0f, size.x - left - 8), h = std::max(8.0f, size.y - 4);
  const double n = static_cast<double>(app.trace->events());
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p0, {p0.x + w, p0.y + h}, IM_COL32(18, 20, 24, 255));
  const int reserved = static_cast<int>(Series::Reserved);
  const int64_t top = std::max<int64_t>(1, result->pyramid[reserved].range(0, app.trace->events()).second);
  ImU32 color = (series_color(Series::Reserved) & 0x00ffffffu) | (150u << 24);
  for (int c = 0; c < static_cast<int>(w); ++c) {
    auto first = static_cast<uint64_t>(n * c / w), last = static_cast<uint64_t>(n * (c + 1) / w);
    int64_t hi = result->pyramid[reserved].range(first, std::max(last, first + 1)).second;
    float y = p0.y + h - h * static_cast<float>(static_cast<double>(hi) / static_cast<double>(top));
    dl->AddRectFilled({p0.x + static_cast<float>(c), y}, {p0.x + static_cast<float>(c) + 1, p0.y + h}, color);
  }
  const auto shown_range = visible_range(app);
  const double begin = shown_range.first, end = shown_range.second;
  float x0 = p0.x + static_cast<float>(begin / n * w), x1 = p0.x + static_cast<float>(end / n * w);
  dl->AddRectFilled({x0, p0.y}, {std::max(x1, x0 + 2), p0.y + h}, IM_COL32(255, 255, 255, 40));
  dl->AddRect({x0, p0.y}, {std::max(x1, x0 + 2), p0.y + h}, IM_COL32(255, 255, 255, 200));
  float xc = p0.x + static_cast<float>(static_cast<double>(app.cursor) / n * w);
  dl->AddLine({xc, p0.y}, {xc, p0.y + h}, IM_COL32(255, 255, 255, 230));
  dl->AddText({origin.x + 2, p0.y + h / 2 - 7}, IM_COL32(170, 170, 170, 255), "overview");

  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##minimap", {w, h});
  ImGuiIO& io = ImGui::GetIO();
  auto event_at = [&](float x) { return std::clamp(static_cast<double>(x - p0.x) / w * n, 0.0, n); };
  if (ImGui::IsItemHovered() && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
    app.timeline.begin = app.timeline.end = 0;
  } else if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2)) {
    // The brush: from where the drag began to the mouse.
    double a = event_at(io.MouseClickedPos[0].x), b = event_at(io.MousePos.x);
    if (a > b) std::swap(a, b);
    if (b - a >= 2) {
      app.timeline.begin = a;
      app.timeline.end = b;
    }
  } else if (ImGui::IsItemDeactivated() && io.MouseDragMaxDistanceSqr[0] < 4.0f && end - begin < n) {
    pan_range(app, begin, end, event_at(io.MousePos.x) - (begin + end) / 2);  // a click centers the range there
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("drag: show that range   click: center the view   double-click: all");
  ImGui::SetCursorScreenPos({origin.x, origin.y + size.y});
}

}  // namespace fraglab::gui
