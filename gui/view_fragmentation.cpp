// Fragmentation at the cursor for the primary policy: the metrics of sim/metrics.h, the
// largest request the policy would serve without more device memory (probed on the
// policy itself), and the free ranges by size.
#include <fmt/core.h>

#include <algorithm>
#include <bit>

#include "gui/views.h"

namespace fraglab::gui {

namespace {

void row(const char* name, const std::string& value, const char* help = nullptr) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(name);
  if (help && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", help);
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(value.c_str());
}

// Free ranges in log2 size buckets: counts and bytes.
void free_range_histogram(const CursorSnapshot& snap, float width) {
  if (snap.free_ranges.empty()) {
    ImGui::TextDisabled("no free ranges: every reserved byte is in a live block");
    return;
  }
  int lo = 63, hi = 0;
  std::array<uint64_t, 64> count{}, bytes{};
  for (uint64_t s : snap.free_ranges) {
    int k = s ? static_cast<int>(std::bit_width(s)) - 1 : 0;
    lo = std::min(lo, k);
    hi = std::max(hi, k);
    ++count[static_cast<size_t>(k)];
    bytes[static_cast<size_t>(k)] += s;
  }
  // At least eight size buckets: one bucket alone would fill the plot as a solid box.
  lo = std::min(lo, std::max(0, hi - 7));
  std::vector<float> values;
  for (int k = lo; k <= hi; ++k) values.push_back(static_cast<float>(bytes[static_cast<size_t>(k)]));
  ImGui::PlotHistogram("##freehist", values.data(), static_cast<int>(values.size()), 0, "free bytes by range size", 0,
                       FLT_MAX, {width, 80});
  if (ImGui::BeginTable("##freetable", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupColumn("range size");
    ImGui::TableSetupColumn("ranges");
    ImGui::TableSetupColumn("bytes");
    ImGui::TableHeadersRow();
    for (int k = hi; k >= lo; --k) {
      if (!count[static_cast<size_t>(k)]) continue;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text(">= %s", bytes_label(uint64_t{1} << k).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%llu", static_cast<unsigned long long>(count[static_cast<size_t>(k)]));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bytes_label(bytes[static_cast<size_t>(k)]).c_str());
    }
    ImGui::EndTable();
  }
}

}  // namespace

void draw_fragmentation(AppState& app, ImVec2 size) {
  const PolicyRun* run = app.primary_run();
  auto snap = run ? run->snapshot() : nullptr;
  ImGui::Text("Fragmentation");
  if (!snap) {
    ImGui::TextDisabled("waiting for the replay to the cursor");
    return;
  }
  const Fragmentation& f = snap->frag;
  ImGui::TextDisabled("%s at event %llu", run->spec().c_str(), static_cast<unsigned long long>(snap->event_index));
  record_fragmentation(app.shown, "fragmentation", run->spec(), {"event", snap->event_index},
                       FreeSpace{f, {}, snap->awaiting_streams});
  if (ImGui::BeginTable("##metrics", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    row("reserved", bytes_label(f.reserved), "physical memory the policy holds (segments and mapped pages)");
    row("allocated", bytes_label(f.allocated), "bytes in live blocks");
    row("requested", bytes_label(f.requested),
        "bytes the program asked for in blocks in memory (PyTorch's requested_bytes: until a free completes)");
    if (snap->awaiting_streams)
      row("awaiting streams", bytes_label(snap->awaiting_streams),
          "freed by the program, held until the other streams that used them are done (record_stream): "
          "PyTorch counts them out of allocated_bytes, and they are not free either");
    row("free in reserved", bytes_label(f.free_bytes), "reserved bytes no block holds: held but unused");
    row("rounding waste", bytes_label(rounding_waste(f, snap->awaiting_streams)),
        "allocated - requested (internal fragmentation), blocks awaiting streams included");
    row("free ranges", fmt::format("{}", f.free_ranges));
    row("largest free range", bytes_label(f.largest_free));
    row("external fragmentation", fmt::format("{:.3f}", f.external()), "1 - largest free range / free bytes");
    std::string fit = snap->largest_fit ? bytes_label(*snap->largest_fit)
                      : snap->probed    ? snap->probe_note
                                        : std::string("probing ...");
    row("largest request that fits", fit,
        "the largest request this policy serves now without new device memory, "
        "found by trying requests on replays to this event (policy rounding and recovery included)");
    ImGui::EndTable();
  }
  ImGui::Spacing();
  ImGui::Text("Free ranges by size");
  free_range_histogram(*snap, size.x - 8);
}

}  // namespace fraglab::gui
