#include "gui/frame.h"

#include <algorithm>

#include "gui/view_table.h"

namespace fraglab::gui {

namespace {

// GLFW key codes (the window queues them, gui/model/key_queue.h; printable keys are their ASCII codes).
constexpr int kKeyRight = 262, kKeyLeft = 263, kKeyDown = 264, kKeyUp = 265, kKeyHome = 268, kKeyEnd = 269,
              kKeyF1 = 290;

void zoom_around_cursor(AppState& app, double factor) {
  if (!app.trace) return;
  const auto shown_range = visible_range(app);
  const double begin = shown_range.first, end = shown_range.second;
  double n = static_cast<double>(app.trace->events());
  double span = std::clamp((end - begin) * factor, std::min(n, 32.0), n);
  double b = std::clamp(static_cast<double>(app.cursor) - span / 2, 0.0, n - span);
  app.timeline.begin = b;
  app.timeline.end = b + span;
  if (span >= n) app.timeline.begin = app.timeline.end = 0;
}

void shortcut(AppState& app, const KeyPress& k) {
  uint64_t step = k.ctrl ? 10000 : k.shift ? 100 : 1;
  if (k.key == kKeyRight) app.set_cursor(app.cursor + step);
  if (k.key == kKeyLeft) app.set_cursor(app.cursor > step ? app.cursor - step : 0);
  if (k.key == kKeyHome) app.set_cursor(0);
  if (k.key == kKeyEnd && app.trace) app.set_cursor(app.trace->events());
  if (k.ctrl) return;
  int dir = k.shift ? -1 : +1;
  switch (k.key) {
    case 'P':
      app.jump_to_peak();
      break;
    case 'O':
      app.jump_to_oom(dir);
      break;
    case 'S':
      app.jump_to_device_grow(dir);
      break;
    case 'C':
      app.color = static_cast<ColorMode>((static_cast<int>(app.color) + 1) % kColorModes);
      break;
    case 'T':
      app.timeline.axis = app.timeline.axis == TimeAxis::Events ? TimeAxis::Time : TimeAxis::Events;
      break;
    case 'Z':
      app.timeline.begin = app.timeline.end = 0;
      break;
    case '=':
      zoom_around_cursor(app, 0.5);
      break;
    case '-':
      zoom_around_cursor(app, 2.0);
      break;
    case '[':
      if (app.primary > 0) --app.primary;
      break;
    case ']':
      if (app.primary + 1 < app.runs.size()) ++app.primary;
      break;
    case kKeyF1:
      app.show(ViewId::Help);
      break;
    default:
      break;
  }
  for (size_t v = 0; v < kViews.size() && v < 9; ++v)  // keys 1 .. 9: the first nine views
    if (k.key == '1' + static_cast<int>(v)) app.show(kViews[v].id);
  if (app.view == ViewId::Events) {  // the list steps with the arrows up and down (matches only: match to match)
    bool matches = app.events.only_matches && !app.events.matches.empty();
    if (k.key == kKeyDown) matches ? app.step_match(+1) : app.set_cursor(app.cursor + 1);
    if (k.key == kKeyUp) matches ? app.step_match(-1) : app.set_cursor(app.cursor > 0 ? app.cursor - 1 : 0);
  }
}

// Every key pressed since the last frame, in order (none is lost between frames); none while a text
// field has the keyboard. After a Ctrl+L, what was typed goes to the path field once it has the keyboard.
void handle_shortcuts(AppState& app) {
  ImGuiIO& io = ImGui::GetIO();
  if (!app.typed_for_path.empty() && io.WantTextInput) {
    for (char32_t c : app.typed_for_path) io.AddInputCharacter(static_cast<unsigned>(c));
    app.typed_for_path.clear();
  }
  QueuedInput input = app.keys.take(io.WantTextInput);
  for (const KeyPress& k : input.shortcuts) shortcut(app, k);
  if (input.focus_path) {
    app.focus_path = true;
    app.typed_for_path += input.typed;
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
  app.shown.clear();
  app.poll();
  handle_shortcuts(app);
  if (app.trace) app.shown.set("cursor", app.cursor);
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
  const float minimap_h = 24;
  ImGui::BeginChild("##timeline", {avail.x, timeline_h - minimap_h}, false, ImGuiWindowFlags_NoScrollWithMouse);
  draw_timeline(app, {avail.x, timeline_h - minimap_h});
  ImGui::EndChild();
  ImGui::BeginChild("##minimap", {avail.x, minimap_h}, false, ImGuiWindowFlags_NoScrollWithMouse);
  draw_minimap(app, {avail.x, minimap_h});
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
