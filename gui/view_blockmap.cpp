// Block map: the policy's device memory at the cursor, to scale. Every segment and
// reserved range is drawn in address order, wrapped into rows; live blocks are colored
// by size class, age or allocation site over free memory (grey) and unmapped reserved
// ranges (near black). Layout and level of detail live in gui/model/block_strip.h.
#include <fmt/core.h>

#include <algorithm>

#include "gui/model/palette.h"
#include "gui/views.h"

namespace fraglab::gui {

namespace {

void block_tooltip(const AppState& app, const CursorSnapshot& snap, const StripHit& hit) {
  ImGui::BeginTooltip();
  const DeviceRegion& reg = snap.regions[static_cast<size_t>(hit.region)];
  ImGui::TextDisabled("%s 0x%llx, %s", reg.is_vmm ? "reserved range" : "segment",
                      static_cast<unsigned long long>(reg.addr), bytes_label(reg.size).c_str());
  auto region = static_cast<size_t>(hit.region);
  if (region < snap.region_pools.size() && snap.region_pools[region] != 0 &&
      snap.region_pools[region] < app.trace->trace.meta.pools.size()) {
    const PoolInfo& pool = app.trace->trace.meta.pools[snap.region_pools[region]];
    ImGui::TextDisabled("private pool %s (%s)", pool_name(pool).c_str(), pool_origin(pool));
  }
  const SnapshotBlock* b = hit.block;
  if (!b) {
    ImGui::Text("%s at +%s", hit.physical ? "free memory" : "unmapped (no physical pages)",
                bytes_label(hit.addr - reg.addr).c_str());
    ImGui::EndTooltip();
    return;
  }
  ImGui::Text("block 0x%llx (+%s), %s", static_cast<unsigned long long>(b->addr),
              bytes_label(b->addr - reg.addr).c_str(), bytes_label(b->size).c_str());
  allocation_details(app, b->alloc_index, 12);
  ImGui::EndTooltip();
}

}  // namespace

void draw_blockmap_view(AppState& app, ImVec2 size) { draw_blockmap(app, app.primary_run(), 0, size, false); }

void draw_blockmap(AppState& app, const PolicyRun* run, int panel, ImVec2 size, bool compact) {
  if (!app.trace || !run) {
    ImGui::TextDisabled("No trace or policy.");
    return;
  }
  if (run->state() == PolicyRun::State::Failed) {
    ImGui::TextColored({1, 0.4f, 0.4f, 1}, "%s", run->error().c_str());
    return;
  }
  auto snap = run->snapshot();
  if (!snap) {
    ImGui::Text("%s: replaying to event %llu ...", run->spec().c_str(), static_cast<unsigned long long>(app.cursor));
    return;
  }
  ImVec2 start = ImGui::GetCursorScreenPos();
  const char* stale = snap->event_index == app.cursor ? "" : "  (updating)";
  if (compact) {
    ImGui::Text("%s  reserved %s%s", run->spec().c_str(), bytes_label(snap->frag.reserved).c_str(), stale);
  } else {
    ImGui::Text("%s at event %llu: %zu regions, %zu live blocks, %s reserved%s", run->spec().c_str(),
                static_cast<unsigned long long>(snap->event_index), snap->regions.size(), snap->blocks.size(),
                bytes_label(snap->frag.reserved).c_str(), stale);
    color_legend(app, true);
  }
  ImVec2 p0 = ImGui::GetCursorScreenPos();
  float avail_h = size.y - (p0.y - start.y);
  const float row_h = compact ? 7 : 12, pitch = row_h + 2;
  int width = std::max(16, static_cast<int>(size.x) - 4);
  int rows = std::max(1, static_cast<int>(avail_h / pitch));
  if (snap->regions.empty()) {
    ImGui::TextDisabled("no device memory at this event");
    return;
  }
  const BlockStrip& strip = strip_for(app, run, panel, snap, width, rows);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  auto draw = [&](const std::vector<StripRect>& rects) {
    for (const StripRect& r : rects) {
      float y = p0.y + static_cast<float>(r.row) * pitch;
      dl->AddRectFilled({p0.x + r.x0, y}, {p0.x + r.x1, y + row_h}, r.color);
    }
  };
  draw(strip.background);
  draw(strip.blocks);
  // Region starts, so that neighbouring segments read as separate allocations; a private
  // pool's region (the recorded lane knows them) gets a flag in its pool's color.
  for (size_t i = 0; i < strip.region_start.size(); ++i) {
    double s = strip.region_start[i];
    int row = static_cast<int>(s / strip.width);
    float x = p0.x + static_cast<float>(s - static_cast<double>(row) * strip.width);
    float y = p0.y + static_cast<float>(row) * pitch;
    dl->AddLine({x, y - 1}, {x, y + row_h + 1}, IM_COL32(235, 235, 235, 255));
    if (i < snap->region_pools.size() && snap->region_pools[i] != 0)
      dl->AddRectFilled({x, y - 2}, {x + 8, y + 2}, pool_color(snap->region_pools[i]));
  }

  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton(fmt::format("##map{}", panel).c_str(),
                         {static_cast<float>(width), static_cast<float>(rows) * pitch});
  if (ImGui::IsItemHovered()) {
    ImVec2 m = ImGui::GetIO().MousePos;
    int row = static_cast<int>((m.y - p0.y) / pitch);
    StripHit hit = hit_test(strip, *snap, row, m.x - p0.x);
    if (hit.region >= 0) block_tooltip(app, *snap, hit);
  }
}

}  // namespace fraglab::gui
