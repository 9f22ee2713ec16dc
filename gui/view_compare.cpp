// Compare: every policy on the same trace side by side at the same cursor, with the
// difference of each one's reserved bytes against the first policy over the timeline's
// visible range (min/max per pixel column, like the timeline).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "gui/views.h"

namespace fraglab::gui {

namespace {

const AppState::DiffCache* diff_for(AppState& app, const PolicyRun* run, const PolicyRun* base) {
  const RunResult* a = run->result();
  const RunResult* b = base->result();
  if (!a || !b) return nullptr;
  auto [it, added] = app.diffs.try_emplace({run, base});
  if (added) {
    const auto& ra = a->series[static_cast<int>(Series::Reserved)].kib();
    const auto& rb = b->series[static_cast<int>(Series::Reserved)].kib();
    it->second.kib.resize(std::min(ra.size(), rb.size()));
    for (size_t i = 0; i < it->second.kib.size(); ++i)
      it->second.kib[i] = static_cast<int32_t>(static_cast<int64_t>(ra[i]) - static_cast<int64_t>(rb[i]));
    it->second.pyramid = MinMaxPyramid(it->second.kib);
  }
  return &it->second;
}

void summary_table(AppState& app) {
  const PolicyRun* base = app.runs.front().get();
  int n = static_cast<int>(app.runs.size());
  if (!ImGui::BeginTable("##cmp", n + 1, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders)) return;
  ImGui::TableSetupColumn("");
  for (const auto& run : app.runs) ImGui::TableSetupColumn(run->spec().c_str());
  ImGui::TableHeadersRow();
  auto line = [&](const char* name, auto&& cell) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(name);
    for (const auto& run : app.runs) {
      ImGui::TableNextColumn();
      cell(*run);
    }
  };
  line("peak reserved", [&](const PolicyRun& r) {
    if (const RunResult* res = r.result()) {
      ImGui::TextUnformatted(bytes_label(res->replay.reserved.bytes).c_str());
    } else if (r.state() == PolicyRun::State::Failed) {
      ImGui::TextColored({1, 0.4f, 0.4f, 1}, "failed");
    } else {
      ImGui::ProgressBar(static_cast<float>(r.progress()), {-1, 0});
    }
  });
  line("vs first at peak", [&](const PolicyRun& r) {
    if (r.result() && base->result())
      ImGui::TextUnformatted(signed_bytes_label(static_cast<int64_t>(r.result()->replay.reserved.bytes) -
                                                static_cast<int64_t>(base->result()->replay.reserved.bytes))
                                 .c_str());
  });
  line("reserved at cursor", [&](const PolicyRun& r) {
    if (auto s = r.snapshot()) ImGui::TextUnformatted(bytes_label(s->frag.reserved).c_str());
  });
  line("external frag. at cursor", [&](const PolicyRun& r) {
    if (auto s = r.snapshot()) ImGui::Text("%.3f", s->frag.external());
  });
  line("device calls", [&](const PolicyRun& r) {
    if (const RunResult* res = r.result())
      ImGui::Text("%llu", static_cast<unsigned long long>(res->replay.calls.total()));
  });
  line("OOMs", [&](const PolicyRun& r) {
    if (const RunResult* res = r.result()) ImGui::Text("%zu", res->replay.ooms.size());
  });
  ImGui::EndTable();
}

void diff_plot(AppState& app, ImVec2 size) {
  const PolicyRun* base = app.runs.front().get();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 origin = ImGui::GetCursorScreenPos();
  const float left = 78;
  ImVec2 p0{origin.x + left, origin.y + 16};
  float w = std::max(10.0f, size.x - left - 8), h = std::max(10.0f, size.y - 20);
  const auto shown_range = visible_range(app);
  const double begin = shown_range.first, end = shown_range.second;
  std::vector<const AppState::DiffCache*> diffs;
  int64_t extent = 1;
  for (size_t i = 1; i < app.runs.size(); ++i) {
    const auto* d = diff_for(app, app.runs[i].get(), base);
    diffs.push_back(d);
    if (!d) continue;
    extent = std::max(extent, diff_extent(d->pyramid, static_cast<uint64_t>(begin),
                                          static_cast<uint64_t>(std::ceil(end)), app.trace->program_end));
  }
  dl->AddText(origin, IM_COL32_WHITE, fmt::format("reserved bytes minus {}'s", base->spec()).c_str());
  dl->AddRectFilled(p0, {p0.x + w, p0.y + h}, IM_COL32(24, 26, 30, 255));
  float mid = p0.y + h / 2;
  double scale = (h / 2 - 2) / static_cast<double>(extent);
  // Past the program's end a difference may exceed the scale (diff_extent): clipped to the plot.
  auto y_of = [&](int64_t kib) {
    return mid - static_cast<float>(static_cast<double>(std::clamp(kib, -extent, extent)) * scale);
  };
  dl->AddLine({p0.x, mid}, {p0.x + w, mid}, IM_COL32(120, 120, 120, 255));
  ImU32 dim = IM_COL32(170, 170, 170, 255);
  dl->AddText({origin.x + 2, p0.y}, dim,
              signed_bytes_label(static_cast<int64_t>(ByteSeries::to_bytes(static_cast<uint32_t>(extent)))).c_str());
  dl->AddText({origin.x + 2, p0.y + h - 14}, dim,
              signed_bytes_label(-static_cast<int64_t>(ByteSeries::to_bytes(static_cast<uint32_t>(extent)))).c_str());
  static const ImU32 kColors[] = {IM_COL32(250, 160, 60, 255), IM_COL32(90, 160, 240, 255),
                                  IM_COL32(200, 100, 220, 255), IM_COL32(120, 200, 120, 255)};
  for (size_t i = 0; i < diffs.size(); ++i) {
    if (!diffs[i]) continue;
    ImU32 color = kColors[i % 4];
    uint64_t next = column_event(app, begin, end, 0, w);
    for (int c = 0; c < static_cast<int>(w); ++c) {
      uint64_t first = next;
      next = column_event(app, begin, end, c + 1, w);
      auto [lo, hi] = diffs[i]->pyramid.range(first, std::max(next, first + 1));
      float x = p0.x + static_cast<float>(c);
      dl->AddRectFilled({x, y_of(hi)}, {x + 1, y_of(lo) + 1}, color);
      if (hi > extent || lo < -extent) {  // clipped: a notch at the edge says so
        float y = hi > extent ? p0.y : p0.y + h - 3;
        dl->AddRectFilled({x, y}, {x + 1, y + 3}, IM_COL32(255, 255, 255, 255));
      }
    }
    std::string label = app.runs[i + 1]->spec();
    dl->AddText({p0.x + 4, p0.y + 2 + 14 * static_cast<float>(i)}, color, label.c_str());
  }
  if (static_cast<double>(app.cursor) >= begin && static_cast<double>(app.cursor) < end) {
    float x = p0.x + static_cast<float>(event_x(app, begin, end, app.cursor, w));
    dl->AddLine({x, p0.y}, {x, p0.y + h}, IM_COL32(255, 255, 255, 230), 1.5f);
  }
  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##diff", {w, h});
  if (ImGui::IsItemActive() && ImGui::IsMouseDown(ImGuiMouseButton_Left))
    app.set_cursor(column_event(app, begin, end, std::clamp(ImGui::GetIO().MousePos.x - p0.x, 0.0f, w), w));
  ImGui::SetCursorScreenPos({origin.x, origin.y + size.y});
}

}  // namespace

void draw_compare(AppState& app, ImVec2 size) {
  if (!app.second_path.empty()) {  // two traces: their comparison is this view
    draw_trace_pair(app, size);
    return;
  }
  if (app.runs.size() < 2) {
    ImGui::TextDisabled(
        "Add a second policy (the policy field above, or --policy twice) to compare, or open two "
        "traces (fraglab-gui A B).");
    return;
  }
  ImVec2 start = ImGui::GetCursorScreenPos();
  summary_table(app);
  float used = ImGui::GetCursorScreenPos().y - start.y;
  float plot_h = std::max(60.0f, (size.y - used) * 0.35f);
  diff_plot(app, {size.x, plot_h});
  used = ImGui::GetCursorScreenPos().y - start.y;
  // Side-by-side block maps, cursors shared through AppState::cursor.
  float col_w = size.x / static_cast<float>(app.runs.size());
  float map_h = size.y - used - 4;
  for (size_t i = 0; i < app.runs.size(); ++i) {
    if (i) ImGui::SameLine(0, 0);
    ImGui::BeginChild(fmt::format("##cmpmap{}", i).c_str(), {col_w - 4, map_h}, false,
                      ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    draw_blockmap(app, app.runs[i].get(), static_cast<int>(i) + 1, {col_w - 4, map_h}, true);
    ImGui::EndChild();
  }
}

}  // namespace fraglab::gui
