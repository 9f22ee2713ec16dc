// Events: the trace's entries around the cursor in a list (every event, or the matches of
// a search), searchable by address, size range, action and frame text
// (gui/model/event_search.h); the selected policy's block map beside it follows the cursor.
// Click a row, or Up/Down, to move the cursor; Enter in the field finds the next match.
#include "gui/views.h"  // imgui.h first: imgui_stdlib.h needs its macros

#include <fmt/core.h>
#include <imgui_stdlib.h>

#include <algorithm>

namespace fraglab::gui {

namespace {

void search_row(AppState& app) {
  auto& st = app.events;
  ImGui::SetNextItemWidth(std::max(160.0f, ImGui::GetContentRegionAvail().x * 0.45f));
  std::string field = st.query;
  bool enter = ImGui::InputTextWithHint("##query", "0x7f..  size:1MiB..4MiB  action:alloc  frame text", &field,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "terms, all of which must hold:\n  0x...           an address inside the event's block or segment\n"
        "  size:A..B       a size range (either end optional), size:A one size\n"
        "  action:NAME     alloc, free, free_requested, segment_alloc, segment_map, oom, ...\n"
        "  other words     in a frame's function or file name");
  if (field != st.query || enter) {
    if (field != st.query) app.search_events(field);
    if (enter) app.step_match(+1);
  }
  ImGui::SameLine();
  if (ImGui::Button("< prev")) app.step_match(-1);
  ImGui::SameLine();
  if (ImGui::Button("next >")) app.step_match(+1);
  ImGui::SameLine();
  ImGui::Checkbox("matches only", &st.only_matches);
  ImGui::SameLine();
  if (!st.error.empty()) {
    ImGui::TextColored({1, 0.4f, 0.4f, 1}, "%s", st.error.c_str());
  } else if (st.searched) {
    ImGui::TextDisabled("%zu matches", st.matches.size());
  } else {
    ImGui::TextDisabled("type to search");
  }
}

void event_row(AppState& app, uint64_t i, bool is_match) {
  const TraceInfo& info = *app.trace;
  const Event& e = info.trace.events[i];
  ImGui::TableNextRow();
  if (i == app.cursor)
    ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, IM_COL32(70, 90, 140, 255));
  else if (is_match)
    ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, IM_COL32(60, 60, 30, 255));
  ImGui::TableNextColumn();
  std::string label = fmt::format("{}", i);
  if (ImGui::Selectable(label.c_str(), i == app.cursor, ImGuiSelectableFlags_SpanAllColumns)) app.set_cursor(i);
  if (ImGui::IsItemHovered() && e.kind == EventKind::Alloc) {
    ImGui::BeginTooltip();
    allocation_details(app, i, 64);
    ImGui::EndTooltip();
  }
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(duration_label(e.time_us - info.time_at(0)).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(event_kind_name(e.kind));
  ImGui::TableNextColumn();
  if (e.addr && e.kind != EventKind::Oom) ImGui::Text("0x%llx", static_cast<unsigned long long>(e.addr));
  ImGui::TableNextColumn();
  if (e.size) ImGui::TextUnformatted(bytes_label(e.size).c_str());
  ImGui::TableNextColumn();
  ImGui::Text("%u", static_cast<unsigned>(e.stream));
  ImGui::TableNextColumn();
  if (e.pool) ImGui::TextUnformatted(pool_name(info.trace.meta.pools[e.pool]).c_str());
  ImGui::TableNextColumn();
  if (e.stack) ImGui::TextUnformatted(info.sites[info.site_of(e)].label.c_str());
}

void event_table(AppState& app, ImVec2 size) {
  auto& st = app.events;
  const TraceInfo& info = *app.trace;
  bool filtered = st.only_matches && st.searched;
  uint64_t rows = filtered ? st.matches.size() : info.events();
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                          ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("##events", 8, flags, size)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  struct Column {
    const char* name;
    float width;  // 0: takes the rest
  };
  for (const Column& c : {Column{"event", 60}, Column{"time", 64}, Column{"action", 100}, Column{"address", 112},
                          Column{"size", 76}, Column{"stream", 44}, Column{"pool", 50}, Column{"site", 0}})
    ImGui::TableSetupColumn(c.name, c.width > 0 ? ImGuiTableColumnFlags_WidthFixed : ImGuiTableColumnFlags_WidthStretch,
                            c.width);
  ImGui::TableHeadersRow();
  // The row the cursor is on (or the first match past it), kept in view when the cursor moves.
  uint64_t cursor_row = filtered
                            ? static_cast<uint64_t>(std::lower_bound(st.matches.begin(), st.matches.end(), app.cursor) -
                                                    st.matches.begin())
                            : app.cursor;
  float row_h = ImGui::GetTextLineHeightWithSpacing();
  if (st.scrolled_to != app.cursor) {
    ImGui::SetScrollY(std::max(0.0f, static_cast<float>(cursor_row) * row_h - size.y / 2));
    st.scrolled_to = app.cursor;
  }
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(std::min<uint64_t>(rows, INT32_MAX)), row_h);
  while (clipper.Step()) {
    for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
      uint64_t i = filtered ? st.matches[static_cast<size_t>(r)] : static_cast<uint64_t>(r);
      bool is_match = !filtered && st.searched && std::binary_search(st.matches.begin(), st.matches.end(), i);
      event_row(app, i, is_match);
    }
  }
  ImGui::EndTable();
}

}  // namespace

void draw_events(AppState& app, ImVec2 size) {
  if (!app.trace) {
    ImGui::TextDisabled("Open a trace to list its events.");
    return;
  }
  float list_w = std::max(300.0f, size.x * 0.64f);
  ImGui::BeginChild("##eventlist", {list_w, size.y}, false);
  search_row(app);
  event_table(app, ImGui::GetContentRegionAvail());
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("##eventmap", {size.x - list_w - 8, size.y}, false, ImGuiWindowFlags_NoScrollWithMouse);
  draw_blockmap(app, app.primary_run(), 1, {size.x - list_w - 8, size.y}, false);
  ImGui::EndChild();
}

}  // namespace fraglab::gui
