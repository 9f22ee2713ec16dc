// The toolbar: open a trace (path field, recent files), the policies replayed with their
// progress, block colors, timeline axis and the navigation buttons.
#include "gui/views.h"  // imgui.h first: imgui_stdlib.h needs its macros

#include <fmt/core.h>
#include <imgui_stdlib.h>

#include "allocators/registry.h"
#include "gui/model/recorded_run.h"

namespace fraglab::gui {

namespace {

void open_row(AppState& app) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Trace");
  ImGui::SameLine();
  if (app.focus_path) {
    ImGui::SetKeyboardFocusHere();
    app.focus_path = false;
  }
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.5f);
  bool enter = ImGui::InputTextWithHint("##path", ".pickle[.gz], .fltrace or .jsonl; or drop a file here",
                                        &app.path_field, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if ((ImGui::Button("Open") || enter) && !app.path_field.empty()) app.open(app.path_field);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  if (ImGui::BeginCombo("##recent", "Recent", ImGuiComboFlags_HeightLarge)) {
    if (app.recent.paths().empty()) ImGui::TextDisabled("no recent files");
    for (const auto& p : app.recent.paths())
      if (ImGui::Selectable(p.c_str())) {
        app.path_field = p;
        app.open(p);
      }
    ImGui::EndCombo();
  }
  // The GPU whose history is shown (a snapshot holds one a device): Enter reads the trace again for it.
  ImGui::SameLine();
  ImGui::SetNextItemWidth(70);
  int device = app.trace ? app.trace->trace.meta.device : std::max(0, app.trace_device);
  if (ImGui::InputInt("GPU", &device, 1, 1, ImGuiInputTextFlags_EnterReturnsTrue) && !app.loading() &&
      !app.checking_pools() && !app.path_field.empty()) {
    app.trace_device = std::max(0, device);
    app.open(app.path_field);
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "the device whose history a multi-GPU snapshot shows; a device with no data names those that have");
  ImGui::SameLine();
  if (app.loading()) {
    ImGui::Text("loading %s ...", app.loading_path().c_str());
  } else if (!app.load_error.empty()) {
    ImGui::PushTextWrapPos(0);  // wrapped at the window's edge, not run off it
    ImGui::TextColored({1, 0.35f, 0.35f, 1}, "%s", app.load_error.c_str());
    ImGui::PopTextWrapPos();
  } else if (app.trace) {
    ImGui::TextDisabled("%llu events, %zu stacks", static_cast<unsigned long long>(app.trace->events()),
                        app.trace->trace.meta.stacks.size() - 1);

    if (app.checking_pools()) {
      ImGui::SameLine();
      ImGui::TextDisabled("(checking the inferred pools with the PyTorch model ...)");
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "a replay of the trace under PyTorch's allocator model; should it place a block "
            "elsewhere than the recording, the trace is read again with the pools it implies");
    }
  }
}

void policy_row(AppState& app) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Policies");
  for (size_t i = 0; i < app.runs.size(); ++i) {
    const PolicyRun& run = *app.runs[i];
    ImGui::SameLine();
    ImGui::PushID(static_cast<int>(i));
    if (ImGui::RadioButton(run.spec().c_str(), app.primary == i)) app.primary = i;
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("show this policy in the timeline, block map and fragmentation views");
    ImGui::SameLine(0, 4);
    if (run.state() == PolicyRun::State::Running) {
      ImGui::ProgressBar(static_cast<float>(run.progress()), {80, 0});
    } else if (run.state() == PolicyRun::State::Failed) {
      ImGui::TextColored({1, 0.35f, 0.35f, 1}, "%s", run.error().c_str());
    } else {
      ImGui::TextDisabled("peak %s", bytes_label(run.result()->replay.reserved.bytes).c_str());
    }
    ImGui::SameLine(0, 4);
    if (ImGui::SmallButton("x")) {
      app.remove_policy(i);
      ImGui::PopID();
      break;
    }
    ImGui::PopID();
  }
  ImGui::SameLine(0, 16);
  ImGui::SetNextItemWidth(240);
  bool enter = ImGui::InputTextWithHint("##policy", "pytorch:expandable_segments:True", &app.policy_field,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if ((ImGui::Button("Add") || enter) && !app.policy_field.empty()) {
    app.add_policy(app.policy_field);
    app.policy_field.clear();
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110);
  if (ImGui::BeginCombo("##registered", "Registered", ImGuiComboFlags_HeightLarge)) {
    if (ImGui::Selectable(kRecordedSpec)) app.policy_field = kRecordedSpec;
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("the recording itself: PyTorch's own blocks at their recorded addresses (snapshots)");
    for (const auto& info : policy_registry()) {
      if (ImGui::Selectable(info.name.c_str())) app.policy_field = info.name;
      if (ImGui::IsItemHovered()) {
        std::string options;
        for (const auto& o : info.options) options += fmt::format("\n  {}={}  {}", o.key, o.default_value, o.help);
        ImGui::SetTooltip("%s\n%s%s", info.summary.c_str(), info.origin.c_str(), options.c_str());
      }
    }
    ImGui::EndCombo();
  }
}

void navigation_row(AppState& app) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Colors");
  for (int c = 0; c < kColorModes; ++c) {
    ImGui::SameLine();
    if (ImGui::RadioButton(kColorNames[c], app.color == static_cast<ColorMode>(c)))
      app.color = static_cast<ColorMode>(c);
  }
  ImGui::SameLine(0, 20);
  ImGui::TextUnformatted("Axis");
  ImGui::SameLine();
  if (ImGui::RadioButton("events", app.timeline.axis == TimeAxis::Events)) app.timeline.axis = TimeAxis::Events;
  ImGui::SameLine();
  if (ImGui::RadioButton("time", app.timeline.axis == TimeAxis::Time)) app.timeline.axis = TimeAxis::Time;
  for (int k = 0; k < kSeriesCount; ++k) {
    ImGui::SameLine();
    ImGui::PushStyleColor(ImGuiCol_Text, series_color(static_cast<Series>(k)));
    ImGui::Checkbox(series_name(static_cast<Series>(k)), &app.timeline.show[k]);
    ImGui::PopStyleColor();
  }
  ImGui::SameLine(0, 20);
  ImGui::SetNextItemWidth(120);
  uint64_t cursor = app.cursor;
  if (ImGui::InputScalar("event", ImGuiDataType_U64, &cursor, nullptr, nullptr, "%llu",
                         ImGuiInputTextFlags_EnterReturnsTrue))
    app.set_cursor(cursor);
  ImGui::SameLine();
  if (ImGui::Button("Peak (P)")) app.jump_to_peak();
  ImGui::SameLine();
  if (ImGui::Button("< OOM")) app.jump_to_oom(-1);
  ImGui::SameLine();
  if (ImGui::Button("OOM > (O)")) app.jump_to_oom(+1);
  ImGui::SameLine();
  if (ImGui::Button("< segment")) app.jump_to_device_grow(-1);
  ImGui::SameLine();
  if (ImGui::Button("segment > (S)")) app.jump_to_device_grow(+1);
}

}  // namespace

void draw_toolbar(AppState& app) {
  open_row(app);
  policy_row(app);
  navigation_row(app);
}

}  // namespace fraglab::gui
