// Help: the keyboard shortcuts and mouse actions.
#include "gui/shortcuts.h"
#include "gui/view_table.h"

namespace fraglab::gui {

void draw_help(AppState&, ImVec2 size) {
  ImGui::Text("Keyboard");
  if (ImGui::BeginTable("##keys", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit, {size.x * 0.6f, 0})) {
    for (const Shortcut& s : kShortcuts) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(s.keys);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(s.action);
    }
    ImGui::EndTable();
  }
  ImGui::Spacing();
  ImGui::Text("Views");
  if (ImGui::BeginTable("##views", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit, {size.x * 0.9f, 0})) {
    for (size_t v = 0; v < kViews.size(); ++v) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      if (v < 9) ImGui::Text("%zu", v + 1);
      ImGui::TableNextColumn();
      ImGui::Text("%s (--view %s)", kViews[v].title, kViews[v].flag);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(kViews[v].help);
    }
    ImGui::EndTable();
  }
  ImGui::Spacing();
  ImGui::Text("Mouse");
  ImGui::BulletText(
      "Timeline: click or drag to move the cursor, wheel to zoom, right-drag to pan, double-click for all.");
  ImGui::BulletText("Block map: hover a block for its size, request, id, lifetime and allocation stack.");
  ImGui::BulletText(
      "Active memory: hover a band for its allocation and full stack, click to move the cursor; wheel, right-drag as the timeline.");
  ImGui::BulletText("Events: click a row to move the cursor; Enter in the search field finds the next match.");
  ImGui::BulletText("Drop a trace file on the window to open it.");
  ImGui::Spacing();
  ImGui::Text("Reading the block map");
  ImGui::BulletText(
      "Memory is drawn to scale in address order, wrapped into rows; white ticks start a segment or range.");
  ImGui::BulletText("Grey is free physical memory, near black a reserved virtual range without pages.");
  ImGui::BulletText("A pixel holding several small blocks shows their mix; darker pixels have free gaps among them.");
}

}  // namespace fraglab::gui
