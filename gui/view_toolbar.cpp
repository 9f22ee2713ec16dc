// The toolbar: open a trace (path field, recent files), the policies replayed with their
// progress, block colors, timeline axis and the navigation buttons.
#include "gui/views.h"  // imgui.h first: imgui_stdlib.h needs its macros

#include <fmt/core.h>
#include <imgui_stdlib.h>

#include "allocators/registry.h"
#include "gui/model/recorded_run.h"

namespace fraglab::gui {

namespace {

// "1 (909 entries)": a GPU of a multi-GPU snapshot with what it holds.
std::string gpu_label(int device, const std::vector<std::pair<int, std::string>>& devices) {
  for (const auto& [d, holds] : devices)
    if (d == device) return fmt::format("{} ({})", d, holds);
  return std::to_string(device);
}

// Reads the open trace again for another GPU of its snapshot.
void switch_gpu(AppState& app, int device) {
  if (app.loading() || app.checking_pools() || app.path_field.empty()) return;
  app.trace_device = std::max(0, device);
  app.open(app.path_field);
}

// The GPU whose history is shown (a snapshot holds one history a device). A snapshot of several GPUs
// lists them with what each holds; otherwise a number, Enter reading the trace again for it (a device
// with no data names those that have some).
void gpu_field(AppState& app) {
  const int shown = app.trace ? app.trace->trace.meta.device : std::max(0, app.trace_device);
  const auto* devices = app.trace ? &app.trace->trace.meta.devices_with_data : nullptr;
  if (devices && !devices->empty()) {
    ImGui::SetNextItemWidth(190);
    if (ImGui::BeginCombo("GPU", gpu_label(shown, *devices).c_str())) {
      for (const auto& d : *devices)
        if (ImGui::Selectable(gpu_label(d.first, *devices).c_str(), d.first == shown) && d.first != shown)
          switch_gpu(app, d.first);
      ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("this snapshot holds %zu GPUs' memory: pick the one to show", devices->size());
    return;
  }
  ImGui::SetNextItemWidth(70);
  int device = shown;
  if (ImGui::InputInt("GPU", &device, 1, 1, ImGuiInputTextFlags_EnterReturnsTrue)) switch_gpu(app, device);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "the device whose history a multi-GPU snapshot shows; a device with no data names those that have");
}

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
  ImGui::SameLine();
  gpu_field(app);
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
      app.shown.set("toolbar.peak_reserved." + run.spec(), run.result()->replay.reserved.bytes);
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
