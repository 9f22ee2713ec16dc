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

void legend(const AppState& app) {
  auto swatch = [](uint32_t color, const char* label) {
    ImVec2 p = ImGui::GetCursorScreenPos();
    float s = ImGui::GetTextLineHeight() - 2;
    ImGui::GetWindowDrawList()->AddRectFilled({p.x, p.y + 1}, {p.x + s, p.y + 1 + s}, color);
    ImGui::Dummy({s, s});
    ImGui::SameLine(0, 3);
    ImGui::TextUnformatted(label);
    ImGui::SameLine(0, 10);
  };
  swatch(kFreeColor, "free");
  swatch(kUnmappedColor, "unmapped");
  switch (app.color) {
    case ColorMode::Size:
      for (const auto& c : kSizeClasses) swatch(c.color, c.label);
      break;
    case ColorMode::Age:
      swatch(age_color(0), "new");
      swatch(age_color(0.5), "");
      swatch(age_color(1), "oldest");
      break;
    case ColorMode::Site: {
      const auto& sites = app.trace->sites;
      int shown = 0;
      for (size_t i = 0; i < sites.size() && shown < 4; ++i)
        if (sites[i].recorded) {
          swatch(site_color(*app.trace, static_cast<uint32_t>(i)), sites[i].label.c_str());
          ++shown;
        }
      swatch(kNoSiteColor, app.trace->has_stacks ? "other sites" : "no stacks in this trace");
      break;
    }
    case ColorMode::Pool: {
      const auto& pools = app.trace->trace.meta.pools;
      swatch(pool_color(0), "default pools");
      for (size_t i = 1; i < pools.size(); ++i)
        swatch(pool_color(static_cast<PoolIndex>(i)), ("pool " + pool_name(pools[i])).c_str());
      break;
    }
  }
  ImGui::NewLine();
}

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
  const TraceInfo& info = *app.trace;
  const Event& alloc = info.trace.events[b->alloc_index];
  ImGui::Text("block 0x%llx (+%s)", static_cast<unsigned long long>(b->addr), bytes_label(b->addr - reg.addr).c_str());
  ImGui::Text("size %s   requested %s   rounding %s", bytes_label(b->size).c_str(), bytes_label(b->requested).c_str(),
              bytes_label(b->size - b->requested).c_str());
  ImGui::Text("allocation id %u, allocated at event %llu, stream %u", alloc.id,
              static_cast<unsigned long long>(b->alloc_index), static_cast<unsigned>(alloc.stream));
  uint64_t freed = info.free_index[b->alloc_index];
  if (freed == TraceInfo::kNever) {
    ImGui::Text("lifetime: never freed (live to the end of the trace)");
  } else {
    ImGui::Text("lifetime: freed at event %llu, %llu events, %s", static_cast<unsigned long long>(freed),
                static_cast<unsigned long long>(freed - b->alloc_index),
                duration_label(info.time_at(freed) - alloc.time_us).c_str());
  }
  const auto& stacks = info.trace.meta.stacks;
  if (alloc.stack != 0 && alloc.stack < stacks.size()) {
    ImGui::Separator();
    ImGui::Text("site: %s", info.sites[info.site_of(alloc)].label.c_str());
    const auto& frames = stacks[alloc.stack];
    for (size_t i = 0; i < frames.size() && i < 8; ++i)
      ImGui::TextDisabled("  %s  %s:%lld", frames[i].name.c_str(), frames[i].filename.c_str(),
                          static_cast<long long>(frames[i].line));
  }
  ImGui::EndTooltip();
}

}  // namespace

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
    legend(app);
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
  ImGui::InvisibleButton(fmt::format("##map{}", panel).c_str(), {static_cast<float>(width), static_cast<float>(rows) * pitch});
  if (ImGui::IsItemHovered()) {
    ImVec2 m = ImGui::GetIO().MousePos;
    int row = static_cast<int>((m.y - p0.y) / pitch);
    StripHit hit = hit_test(strip, *snap, row, m.x - p0.x);
    if (hit.region >= 0) block_tooltip(app, *snap, hit);
  }
}

}  // namespace fraglab::gui
