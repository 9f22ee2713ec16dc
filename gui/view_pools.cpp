// Pools: the default pools and every private pool (a CUDA graph's, a torch.cuda.MemPool's), as
// MemoryViz's segment views tell them apart: at the cursor, each pool's segments and its reserved,
// allocated, requested and free bytes under the selected lane; over the trace, its peak reserved bytes
// (from the recorded segment calls) and the allocations sent to it (gui/model/pool_usage.h).
#include <fmt/core.h>

#include "gui/model/palette.h"
#include "gui/model/pool_usage.h"
#include "gui/views.h"

namespace fraglab::gui {

void draw_pools(AppState& app, ImVec2 size) {
  const PolicyRun* run = app.primary_run();
  auto snap = run ? run->snapshot() : nullptr;
  if (!app.trace || !snap) {
    ImGui::TextDisabled(app.trace ? "waiting for the replay to the cursor" : "Open a trace to see its pools.");
    return;
  }
  if (app.segments.trace != app.trace.get()) {
    app.segments.trace = app.trace.get();
    app.segments.spans = segment_spans(app.trace->trace);
    app.segments.begin = app.segments.end = -1;
  }
  std::vector<PoolUsage> pools = pool_usage(*app.trace, *snap, app.segments.spans);
  ImGui::PushTextWrapPos(size.x - 8);
  ImGui::Text("%zu pool%s under %s at event %llu.", pools.size(), pools.size() == 1 ? "" : "s", run->spec().c_str(),
              static_cast<unsigned long long>(snap->event_index));
  if (pools.size() == 1)
    ImGui::TextDisabled(
        "This trace has no private pool: no CUDA graph capture or torch.cuda.MemPool allocated through it.");
  ImGui::PopTextWrapPos();
  const char* columns[] = {"pool",      "made by", "segments",      "reserved",    "allocated",
                           "requested", "free",    "peak reserved", "allocations", "bytes allocated"};
  if (!ImGui::BeginTable("##pools", 10,
                         ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit))
    return;
  for (const char* c : columns) ImGui::TableSetupColumn(c);
  ImGui::TableHeadersRow();
  for (const PoolUsage& u : pools) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImVec2 p = ImGui::GetCursorScreenPos();
    float s = ImGui::GetTextLineHeight() - 4;
    ImGui::GetWindowDrawList()->AddRectFilled({p.x, p.y + 2}, {p.x + s, p.y + 2 + s}, pool_color(u.pool));
    ImGui::Dummy({s, s});
    ImGui::SameLine();
    ImGui::TextUnformatted(u.name.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%s%s%s", u.pool ? u.origin.c_str() : "PyTorch (small and large)", u.traits.empty() ? "" : "; ",
                u.traits.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%llu", static_cast<unsigned long long>(u.segments));
    for (uint64_t v : {u.reserved, u.allocated, u.requested, u.free_bytes}) {
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bytes_label(v).c_str());
    }
    ImGui::TableNextColumn();
    ImGui::PushID(static_cast<int>(u.pool));
    if (ImGui::SmallButton(fmt::format("{} @{}", bytes_label(u.peak_reserved), u.peak_event).c_str()))
      app.set_cursor(u.peak_event);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("move the cursor to this pool's peak");
    ImGui::PopID();
    ImGui::TableNextColumn();
    ImGui::Text("%llu", static_cast<unsigned long long>(u.allocations));
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(u.bytes_allocated).c_str());
  }
  ImGui::EndTable();
  ImGui::PushTextWrapPos(size.x - 8);
  ImGui::TextDisabled(
      "A private pool's segments serve only its own allocations; its free bytes are unusable by the rest "
      "of the program until the pool is released (graph reset, MemPool deleted) and the cache emptied.");
  ImGui::PopTextWrapPos();
  ImGui::Spacing();
  // The block map beside it, in the colors of the table under --color pool (C cycles to it).
  draw_blockmap(app, run, 7, {size.x, std::max(80.0f, ImGui::GetContentRegionAvail().y)}, false);
}

}  // namespace fraglab::gui
