// Active memory: every allocation of the trace as a band stacked over time, oldest at the
// bottom (gui/model/active_memory.h), over the timeline's visible range. The picture is a
// texture rastered on a worker at the plot's size; zooming or panning draws the previous
// one until the new one is there, so frames stay cheap whatever the trace's length.
// Hover: the allocation under the mouse with its full stack; click: the cursor there;
// wheel and right-drag zoom and pan as on the timeline.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "gui/views.h"

namespace fraglab::gui {

namespace {

constexpr float kLeftMargin = 78, kBottomMargin = 16;

RasterRequest request_for(const AppState& app, double begin, double end, int width, int height) {
  RasterRequest r;
  r.begin = begin;
  r.end = end;
  r.width = width;
  r.height = height;
  r.color = static_cast<BandColor>(static_cast<int>(app.color));
  r.axis = static_cast<int>(app.timeline.axis);
  auto trace = app.trace;
  if (app.timeline.axis == TimeAxis::Time) {
    r.column_event = [trace, begin, end, width](double column) {
      auto t0 = static_cast<double>(trace->time_at(static_cast<uint64_t>(begin)));
      auto t1 = static_cast<double>(trace->time_at(static_cast<uint64_t>(std::max(begin, end - 1))));
      uint64_t i = trace->index_at_time(static_cast<int64_t>(t0 + (t1 - t0) * column / width));
      return std::clamp<uint64_t>(i, static_cast<uint64_t>(begin), static_cast<uint64_t>(end));
    };
  }
  return r;
}

// The band under the mouse, cached: finding it sweeps from a checkpoint.
struct HoverCache {
  const ActiveMemory* model = nullptr;
  uint64_t event = UINT64_MAX, bytes_row = UINT64_MAX;
  std::optional<uint64_t> band;
};

std::optional<uint64_t> band_under(const ActiveMemory& model, uint64_t event, uint64_t bytes, uint64_t row) {
  static HoverCache cache;
  if (cache.model != &model || cache.event != event || cache.bytes_row != row) {
    cache = {&model, event, row, model.band_at(event, bytes)};
  }
  return cache.band;
}

}  // namespace

void draw_memory(AppState& app, ImVec2 size) {
  if (!app.trace) {
    ImGui::TextDisabled("Open a trace to see its allocations over time.");
    return;
  }
  ActiveMemoryRun& run = app.memory_run();
  const ActiveMemory* model = run.model();
  ImGui::Text("Active memory: every allocation, stacked oldest first, as tall as its request");
  color_legend(app, false);
  if (!model) {
    ImGui::Text("Building the allocation timeline ...");
    ImGui::ProgressBar(static_cast<float>(run.progress()), {size.x * 0.5f, 0});
    return;
  }
  ImVec2 origin = ImGui::GetCursorScreenPos();
  float used = origin.y - ImGui::GetWindowPos().y;
  ImVec2 p0{origin.x + kLeftMargin, origin.y + 2};
  float w = std::max(10.0f, size.x - kLeftMargin - 8), h = std::max(10.0f, size.y - used - kBottomMargin - 6);
  const auto shown_range = visible_range(app);
  const double begin = shown_range.first, end = shown_range.second;
  run.request(request_for(app, begin, end, static_cast<int>(w), static_cast<int>(h)));

  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p0, {p0.x + w, p0.y + h}, IM_COL32(24, 26, 30, 255));
  auto raster = run.raster();
  if (raster && raster != app.memory_texture.raster) {
    if (app.upload_texture) app.memory_texture.id = app.upload_texture(*raster, app.memory_texture.id);
    app.memory_texture.raster = raster;
  }
  raster = app.memory_texture.raster;
  if (!raster) {
    ImGui::TextDisabled("rastering ...");
    return;
  }
  if (app.memory_texture.id != 0)
    dl->AddImage(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(app.memory_texture.id)), p0, {p0.x + w, p0.y + h});
  const RasterRequest& shown = raster->request;
  bool current = shown.begin == begin && shown.end == end;

  // Scale and the cursor, in the raster's own range (the picture on screen).
  ImU32 dim = IM_COL32(170, 170, 170, 255);
  const ByteTicks ticks = byte_ticks(raster->top_bytes, 4);
  for (uint64_t bytes : ticks.values) {
    float y = p0.y + h - h * static_cast<float>(static_cast<double>(bytes) / static_cast<double>(raster->top_bytes));
    dl->AddLine({p0.x - 4, y}, {p0.x, y}, dim);
    dl->AddText({origin.x + 2, y - 7}, dim, ticks.label(bytes).c_str());
  }
  auto column_of = [&](uint64_t e) -> float {
    return static_cast<float>(raster->column_of(e)) * w /
           static_cast<float>(std::max<size_t>(1, raster->column_first.size()));
  };
  if (static_cast<double>(app.cursor) >= shown.begin && static_cast<double>(app.cursor) < shown.end) {
    float x = p0.x + column_of(app.cursor);
    dl->AddLine({x, p0.y}, {x, p0.y + h}, IM_COL32(255, 255, 255, 230), 1.5f);
  }
  std::string axis = fmt::format("events {} .. {}   live requested at the cursor: {}{}",
                                 static_cast<uint64_t>(shown.begin), static_cast<uint64_t>(shown.end),
                                 bytes_label(model->total().bytes_at(app.cursor)), current ? "" : "   (updating)");
  dl->AddText({p0.x, p0.y + h + 2}, dim, axis.c_str());

  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##memory", {w, h});
  ImGuiIO& io = ImGui::GetIO();
  bool hovered = ImGui::IsItemHovered();
  float mx = std::clamp(io.MousePos.x - p0.x, 0.0f, w - 1);
  auto col = std::min(raster->column_event.size() - 1,
                      static_cast<size_t>(mx / w * static_cast<float>(raster->column_event.size())));
  uint64_t mouse_event = raster->column_event[col];
  if (hovered && io.MouseWheel != 0)
    zoom_range(app, begin, end, static_cast<double>(mouse_event), std::pow(0.8, io.MouseWheel));
  if (hovered && ImGui::IsMouseDragging(ImGuiMouseButton_Right))
    pan_range(app, begin, end, -static_cast<double>(io.MouseDelta.x) / w * (end - begin));
  if (ImGui::IsItemActive() && ImGui::IsMouseDown(ImGuiMouseButton_Left)) app.set_cursor(mouse_event);
  if (hovered) {
    float from_bottom = std::clamp(p0.y + h - io.MousePos.y, 0.0f, h);
    auto bytes = static_cast<uint64_t>(static_cast<double>(from_bottom) / h * static_cast<double>(raster->top_bytes));
    auto band = band_under(*model, mouse_event, bytes, static_cast<uint64_t>(from_bottom));
    ImGui::BeginTooltip();
    ImGui::Text("event %llu (%s), %s live", static_cast<unsigned long long>(mouse_event),
                duration_label(app.trace->time_at(mouse_event) - app.trace->time_at(0)).c_str(),
                bytes_label(model->total().bytes_at(mouse_event)).c_str());
    if (band) {
      ImGui::Separator();
      allocation_details(app, *band, 64);
    } else {
      ImGui::TextDisabled("no allocation here");
    }
    ImGui::TextDisabled("click: cursor  wheel: zoom  right-drag: pan");
    ImGui::EndTooltip();
  }
}

}  // namespace fraglab::gui
