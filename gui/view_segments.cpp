// Segments: the cached-segment timeline (gui/model/segment_timeline.h). Every segment the recording
// allocator held (cudaMalloc) and every run of pages mapped into an expandable segment, stacked over the
// timeline's visible range in the order they were made, in their pool's color (expandable pages
// lighter); the stack's height is the reserved bytes. Hover a segment for its address, size, pool and
// life; click to move the cursor. The picture is built on the UI thread when the range or size changes
// (one pass over the trace and one over the live spans a column) and drawn as one texture.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "gui/model/palette.h"
#include "gui/views.h"

namespace fraglab::gui {

void draw_segments(AppState& app, ImVec2 size) {
  if (!app.trace) {
    ImGui::TextDisabled("Open a trace to see its segments.");
    return;
  }
  const TraceInfo& info = *app.trace;
  AppState::SegmentsState& st = app.segments;
  if (st.trace != &info) {
    st.trace = &info;
    st.spans = segment_spans(info.trace);
    st.begin = st.end = -1;
  }
  if (st.spans.empty()) {
    ImGui::TextDisabled("This trace records no segment calls (segment_alloc / segment_map) and no initial segments.");
    return;
  }
  const auto shown_range = visible_range(app);
  const double begin = shown_range.first, end = shown_range.second;
  uint64_t vmm = 0;
  for (const SegmentSpan& s : st.spans) vmm += s.vmm;
  ImGui::Text("%zu segments and mapped ranges (%llu of them expandable segments' pages), oldest at the bottom",
              st.spans.size(), static_cast<unsigned long long>(vmm));
  ImGui::SameLine(0, 16);
  ImGui::TextDisabled("colors: the pool; lighter: expandable pages");
  ImVec2 origin = ImGui::GetCursorScreenPos();
  const float left = 78;
  ImVec2 p0{origin.x + left, origin.y};
  float w = std::max(16.0f, size.x - left - 8), h = std::max(40.0f, ImGui::GetContentRegionAvail().y - 22);
  const int width = static_cast<int>(w), height = static_cast<int>(h);
  auto first_of = [&](int c) { return column_event(app, begin, end, static_cast<double>(c), w); };
  if (st.begin != begin || st.end != end || st.raster.width != width || st.raster.height != height ||
      st.axis != static_cast<int>(app.timeline.axis)) {
    st.raster = build_segment_raster(st.spans, info.events(), first_of, width, height);
    st.begin = begin, st.end = end, st.axis = static_cast<int>(app.timeline.axis);
    if (app.upload_texture) {
      MemoryRaster picture;  // the texture upload's shape: size and rgba
      picture.request.width = st.raster.width;
      picture.request.height = st.raster.height;
      picture.rgba = st.raster.rgba;
      st.texture = app.upload_texture(picture, st.texture);
    }
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (st.texture) {
    dl->AddImage(reinterpret_cast<ImTextureID>(static_cast<uintptr_t>(st.texture)), p0, {p0.x + w, p0.y + h});
  } else {
    dl->AddRectFilled(p0, {p0.x + w, p0.y + h}, IM_COL32(24, 26, 30, 255));
  }
  ImU32 dim = IM_COL32(170, 170, 170, 255);
  const ByteTicks ticks = byte_ticks(st.raster.top_bytes, 4);
  for (uint64_t v : ticks.values) {
    float y = p0.y + h - h * static_cast<float>(static_cast<double>(v) / static_cast<double>(st.raster.top_bytes));
    dl->AddLine({p0.x - 4, y}, {p0.x, y}, dim);
    dl->AddText({origin.x + 2, y - 7}, dim, ticks.label(v).c_str());
  }
  if (static_cast<double>(app.cursor) >= begin && static_cast<double>(app.cursor) < end) {
    float x = p0.x + static_cast<float>(event_x(app, begin, end, app.cursor, w));
    dl->AddLine({x, p0.y}, {x, p0.y + h}, IM_COL32(255, 255, 255, 230), 1.5f);
  }
  std::string axis = fmt::format("events {} .. {}   reserved at the cursor's column: {}", static_cast<uint64_t>(begin),
                                 static_cast<uint64_t>(end),
                                 bytes_label(st.raster.column_reserved[static_cast<size_t>(std::clamp(
                                     static_cast<int>(event_x(app, begin, end, app.cursor, w)), 0, width - 1))]));
  dl->AddText({p0.x, p0.y + h + 2}, dim, axis.c_str());
  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##segments", {w, h});
  ImGuiIO& io = ImGui::GetIO();
  int column = std::clamp(static_cast<int>(io.MousePos.x - p0.x), 0, width - 1);
  if (ImGui::IsItemActive() && ImGui::IsMouseDown(ImGuiMouseButton_Left)) app.set_cursor(first_of(column));
  if (ImGui::IsItemHovered()) {
    if (io.MouseWheel != 0)
      zoom_range(app, begin, end, static_cast<double>(first_of(column)), std::pow(0.8, io.MouseWheel));
    if (ImGui::IsMouseDragging(ImGuiMouseButton_Right))
      pan_range(app, begin, end, -static_cast<double>(io.MouseDelta.x) / w * (end - begin));
    double from_bottom = (p0.y + h - io.MousePos.y) / h * static_cast<double>(st.raster.top_bytes);
    int64_t k = span_at(st.spans, st.raster, column, static_cast<uint64_t>(std::max(0.0, from_bottom)));
    if (k >= 0) {
      const SegmentSpan& s = st.spans[static_cast<size_t>(k)];
      const auto& pools = info.trace.meta.pools;
      ImGui::BeginTooltip();
      ImGui::Text("%s 0x%llx, %s", s.vmm ? "expandable segment's pages" : "segment (cudaMalloc)",
                  static_cast<unsigned long long>(s.addr), bytes_label(s.size).c_str());
      ImGui::Text("pool %s", s.pool < pools.size() ? pool_name(pools[s.pool]).c_str() : "?");
      ImGui::Text("%s at event %llu, %s", s.vmm ? "mapped" : "allocated", static_cast<unsigned long long>(s.begin),
                  s.end >= info.events() ? "held to the end"
                                         : fmt::format("{} at event {} ({})", s.vmm ? "unmapped" : "freed", s.end,
                                                       duration_label(info.time_at(s.end) - info.time_at(s.begin)))
                                               .c_str());
      ImGui::TextDisabled("showing event %llu, the column's highest reserved bytes",
                          static_cast<unsigned long long>(st.raster.column_event[static_cast<size_t>(column)]));
      ImGui::EndTooltip();
    }
  }
  ImGui::SetCursorScreenPos({origin.x, p0.y + h + 20});
}

}  // namespace fraglab::gui
