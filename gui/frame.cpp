#include "gui/frame.h"

#include <algorithm>

#include "gui/view_table.h"

namespace fraglab::gui {

namespace {

// GLFW key codes, which the GLFW backend puts in io.KeysDown (printable keys are their
// ASCII codes). ImGui 1.86 (Debian 12) has no named keys for letters yet.
constexpr int kKeyF1 = 290;

bool pressed(int key) { return ImGui::IsKeyPressed(key, true); }
bool pressed_named(ImGuiKey_ key) { return ImGui::IsKeyPressed(ImGui::GetKeyIndex(key), true); }

void zoom_around_cursor(AppState& app, double factor) {
  if (!app.trace) return;
  auto [begin, end] = visible_range(app);
  double n = static_cast<double>(app.trace->events());
  double span = std::clamp((end - begin) * factor, std::min(n, 32.0), n);
  double b = std::clamp(static_cast<double>(app.cursor) - span / 2, 0.0, n - span);
  app.timeline.begin = b;
  app.timeline.end = b + span;
  if (span >= n) app.timeline.begin = app.timeline.end = 0;
}

void handle_shortcuts(AppState& app) {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  if (io.KeyCtrl && pressed('L')) {
    app.focus_path = true;
    return;
  }
  uint64_t step = io.KeyCtrl ? 10000 : io.KeyShift ? 100 : 1;
  if (pressed_named(ImGuiKey_RightArrow)) app.set_cursor(app.cursor + step);
  if (pressed_named(ImGuiKey_LeftArrow)) app.set_cursor(app.cursor > step ? app.cursor - step : 0);
  if (pressed_named(ImGuiKey_Home)) app.set_cursor(0);
  if (pressed_named(ImGuiKey_End) && app.trace) app.set_cursor(app.trace->events());
  if (io.KeyCtrl) return;
  int dir = io.KeyShift ? -1 : +1;
  if (pressed('P')) app.jump_to_peak();
  if (pressed('O')) app.jump_to_oom(dir);
  if (pressed('S')) app.jump_to_device_grow(dir);
  if (pressed('C')) app.color = static_cast<ColorMode>((static_cast<int>(app.color) + 1) % kColorModes);
  if (pressed('T')) app.timeline.axis = app.timeline.axis == TimeAxis::Events ? TimeAxis::Time : TimeAxis::Events;
  if (pressed('Z')) app.timeline.begin = app.timeline.end = 0;
  if (pressed('=')) zoom_around_cursor(app, 0.5);
  if (pressed('-')) zoom_around_cursor(app, 2.0);
  if (pressed('[') && app.primary > 0) --app.primary;
  if (pressed(']') && app.primary + 1 < app.runs.size()) ++app.primary;
  for (size_t v = 0; v < kViews.size(); ++v)
    if (pressed('1' + static_cast<int>(v))) app.show(kViews[v].id);
  if (pressed(kKeyF1)) app.show(ViewId::Help);
  if (app.view == ViewId::Events) {  // the list steps with the arrows up and down (matches only: match to match)
    bool matches = app.events.only_matches && !app.events.matches.empty();
    if (pressed_named(ImGuiKey_DownArrow)) matches ? app.step_match(+1) : app.set_cursor(app.cursor + 1);
    if (pressed_named(ImGuiKey_UpArrow))
      matches ? app.step_match(-1) : app.set_cursor(app.cursor > 0 ? app.cursor - 1 : 0);
  }
}

void tabs(AppState& app, ImVec2 size) {
  if (!ImGui::BeginTabBar("##views")) return;
  for (const ViewEntry& entry : kViews) {
    bool wanted = app.view == entry.id;
    ImGuiTabItemFlags flags = app.view_changed && wanted ? ImGuiTabItemFlags_SetSelected : 0;
    bool open = ImGui::BeginTabItem(entry.title, nullptr, flags);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", entry.help);
    if (!open) continue;
    // A requested tab is selected once ImGui shows it; until then the request stands.
    if (!app.view_changed) {
      app.view = entry.id;
    } else if (wanted) {
      app.view_changed = false;
    }
    ImVec2 avail = ImGui::GetContentRegionAvail();
    avail.y = std::min(avail.y, size.y);
    ImGui::BeginChild("##view", avail, false, ImGuiWindowFlags_NoScrollWithMouse);
    entry.draw(app, avail);
    ImGui::EndChild();
    ImGui::EndTabItem();
  }
  ImGui::EndTabBar();
}

}  // namespace

void apply_style() {
  ImGui::StyleColorsDark();
  ImGuiStyle& style = ImGui::GetStyle();
  style.WindowRounding = 0;
  style.FrameRounding = 2;
  style.ItemSpacing = {6, 4};
}

void build_frame(AppState& app) {
  app.poll();
  handle_shortcuts(app);
  ImGuiIO& io = ImGui::GetIO();
  ImGui::SetNextWindowPos({0, 0});
  ImGui::SetNextWindowSize(io.DisplaySize);
  ImGui::Begin("fraglab", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus);
  draw_toolbar(app);
  ImGui::Separator();
  ImVec2 avail = ImGui::GetContentRegionAvail();
  float timeline_h = std::max(120.0f, avail.y * 0.30f);
  ImGui::BeginChild("##timeline", {avail.x, timeline_h}, false, ImGuiWindowFlags_NoScrollWithMouse);
  draw_timeline(app, {avail.x, timeline_h});
  ImGui::EndChild();
  avail = ImGui::GetContentRegionAvail();
  float side_w = std::clamp(avail.x * 0.27f, 260.0f, 420.0f);
  ImGui::BeginChild("##main", {avail.x - side_w - 6, avail.y}, false, ImGuiWindowFlags_NoScrollWithMouse);
  tabs(app, ImGui::GetContentRegionAvail());
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("##fragmentation", {side_w, avail.y}, true);
  draw_fragmentation(app, {side_w - 16, avail.y});
  ImGui::EndChild();
  ImGui::End();
}

}  // namespace fraglab::gui
