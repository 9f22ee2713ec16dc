// Settings: the recording allocator's settings in full, as PyTorch's MemoryViz lists a snapshot's
// allocator_settings: the PYTORCH_CUDA_ALLOC_CONF text it started from, every value the snapshot
// reported, and what fraglab's PyTorch model parsed from them (the settings the `pytorch` policy and
// the recorded lane's block sizes use), with what was inferred rather than recorded said so.
#include <fmt/core.h>

#include "allocators/pytorch/config.h"
#include "gui/views.h"

namespace fraglab::gui {

namespace {

void row(const char* name, const std::string& value, const char* help = "") {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(name);
  if (*help && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", help);  // a tooltip: never clipped by the column
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(value.c_str());
}

std::string mib_or_unset(uint64_t bytes) {
  return bytes == UINT64_MAX ? std::string("unset (no limit)") : bytes_label(bytes);
}

}  // namespace

void draw_settings(AppState& app, ImVec2 size) {
  if (!app.trace) {
    ImGui::TextDisabled("Open a trace to see its allocator settings.");
    return;
  }
  const TraceMeta& meta = app.trace->trace.meta;
  ImGui::PushTextWrapPos(size.x - 8);
  if (meta.allocator_settings.empty()) {
    ImGui::TextUnformatted("This trace records no allocator settings: PyTorch's defaults are assumed.");
  } else if (auto conf = detail::recorded_conf(meta.allocator_settings)) {
    ImGui::Text("%s %s='%s'",
                meta.settings_inferred ? "Inferred from the recording (the snapshot records none):" : "Recorded with",
                conf.variable, conf.text->c_str());
  }
  ImGui::PopTextWrapPos();
  const float half = size.x * 0.5f - 6;
  ImGui::BeginChild("##settings_parsed", {half, 0}, false);
  ImGui::Text("As the PyTorch model reads them");
  detail::PytorchAllocatorConfig c;
  std::vector<std::string> unknown;
  std::string error;
  try {
    c.apply_recorded(meta.allocator_settings, &unknown);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) ImGui::TextColored({1, 0.4f, 0.4f, 1}, "%s", error.c_str());
  if (ImGui::BeginTable("##parsed", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
    row("expandable_segments", c.expandable_segments ? "True" : "False",
        "segments grow by mapping pages (cuMemMap) instead of new cudaMallocs");
    row("max_split_size_mb", mib_or_unset(c.max_split_size), "blocks at or past it are never split");
    row("max_non_split_rounding_mb", bytes_label(c.max_non_split_rounding_size),
        "an oversize block serves a request this much larger at most");
    row("large_segment_size_mb", bytes_label(c.large_segment_size), "the segment a 1-10 MiB request gets");
    row("garbage_collection_threshold",
        c.garbage_collection_threshold > 0 ? fmt::format("{:.2f}", c.garbage_collection_threshold) : "off",
        "frees cached blocks past this fraction of the limit");
    row("per_process_memory_fraction",
        c.per_process_memory_fraction ? fmt::format("{:.3f}", *c.per_process_memory_fraction) : "unset", "");
    for (size_t i = 0; i < detail::kRoundUpPowerOfTwoIntervals; ++i) {
      if (c.roundup_power2_divisions[i] == 0) continue;
      uint64_t from = uint64_t{1} << (20 + i);
      row(i == 0 ? "roundup_power2_divisions" : "",
          fmt::format("{} divisions for {} .. {}", c.roundup_power2_divisions[i], i == 0 ? "0" : bytes_label(from),
                      i + 1 == detail::kRoundUpPowerOfTwoIntervals ? "any" : bytes_label(from * 2)),
          "requests round to a division of their power-of-two interval");
    }
    ImGui::EndTable();
  }
  for (const auto& k : unknown) ImGui::TextDisabled("skipped (unknown to this model): %s", k.c_str());
  if (!meta.expandable_flipped.empty()) {
    ImGui::Spacing();
    ImGui::Text("expandable_segments changed while recording (torch.cuda.memory._set_allocator_settings):");
    for (const auto& [first, end] : meta.expandable_flipped)
      ImGui::BulletText("allocations %llu .. %llu ran with it %s", static_cast<unsigned long long>(first),
                        static_cast<unsigned long long>(end), c.expandable_segments ? "off" : "on");
  }
  ImGui::Spacing();
  ImGui::Text("Device limit");
  ImGui::PushTextWrapPos(half - 8);
  if (app.device.capacity)
    ImGui::Text("--capacity %s", bytes_label(*app.device.capacity).c_str());
  else if (app.trace->inferred_capacity)
    ImGui::Text("%s (%s)", bytes_label(*app.trace->inferred_capacity).c_str(), app.trace->capacity_note.c_str());
  else
    ImGui::TextUnformatted("none recorded: policies replay on an unlimited device");
  if (meta.gpu_limit) ImGui::TextUnformatted("the recording's limit was the GPU's own memory (no memory fraction)");
  ImGui::PopTextWrapPos();
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("##settings_raw", {0, 0}, false);
  ImGui::Text("As the snapshot recorded them (allocator_settings)");
  if (ImGui::BeginTable("##raw", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
    for (const auto& [key, value] : meta.allocator_settings) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(key.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(value.c_str());
    }
    ImGui::EndTable();
  }
  ImGui::Spacing();
  ImGui::Text("Pools");
  for (size_t p = 0; p < meta.pools.size(); ++p) {
    std::string traits = pool_traits(meta.pools[p]);
    ImGui::BulletText("%s%s%s%s%s", pool_name(meta.pools[p]).c_str(), p ? ": " : "", pool_origin(meta.pools[p]),
                      traits.empty() ? "" : ", ", traits.c_str());
  }
  ImGui::EndChild();
}

}  // namespace fraglab::gui
