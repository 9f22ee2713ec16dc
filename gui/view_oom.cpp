// OOMs: `fraglab diagnose` at each OOM of the trace (report/diagnose.h, on a worker): the
// request against the largest free range, where the free bytes are, the segments that
// would have served it as one range and the live blocks pinning them (by call site, or
// size class without stacks), and the verdict: the allocator setting under which every
// allocation fits. Selecting an OOM moves the cursor there, so the timeline and block map
// show the same moment.
#include <fmt/core.h>

#include <algorithm>

#include "gui/model/free_space.h"
#include "gui/views.h"

namespace fraglab::gui {

namespace {

void shares(const char* title, const std::vector<ByteShare>& list, const char* count_name, size_t most) {
  if (list.empty()) return;
  ImGui::TextDisabled("%s", title);
  if (!ImGui::BeginTable(title, 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) return;
  for (size_t i = 0; i < list.size() && i < most; ++i) {
    const ByteShare& s = list[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(s.bytes).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%llu %s", static_cast<unsigned long long>(s.count), count_name);
    ImGui::TableNextColumn();
    ImGui::Text("largest %s", bytes_label(s.largest).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(s.key.c_str());
  }
  ImGui::EndTable();
}

size_t selected_oom(const AppState& app, const DiagnoseReport& r) {
  for (size_t i = 0; i < r.ooms.size(); ++i)
    if (shown_event(r.ooms[i]) >= app.cursor) return i;
  return r.ooms.empty() ? 0 : r.ooms.size() - 1;
}

void oom_list(AppState& app, const DiagnoseReport& r, size_t selected, float height) {
  if (!ImGui::BeginTable("##ooms", 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingFixedFit,
                         {0, height}))
    return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* c : {"#", "event", "request", "largest free", "reserved"}) ImGui::TableSetupColumn(c);
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < r.ooms.size(); ++i) {
    const Diagnosis& d = r.ooms[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    if (ImGui::Selectable(fmt::format("{}", i + 1).c_str(), i == selected, ImGuiSelectableFlags_SpanAllColumns))
      app.set_cursor(shown_event(d));
    ImGui::TableNextColumn();
    ImGui::Text("%llu", static_cast<unsigned long long>(shown_event(d)));
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(d.request_bytes ? bytes_label(d.request_bytes).c_str() : "(peak)");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(d.state.largest_free).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(d.state.reserved).c_str());
  }
  ImGui::EndTable();
}

// Who holds the live memory (report/program_attribution.h): the lines of the user's code, categories, steps.
void holders(const Diagnosis& d) {
  const LiveAttribution& l = d.live;
  ImGui::Spacing();
  if (!d.request_site.empty()) ImGui::Text("the request came from %s", d.request_site.c_str());
  ImGui::Text("live %s in %llu tensors (categories from %s)", bytes_label(l.live_bytes).c_str(),
              static_cast<unsigned long long>(l.live_count), l.inferred_from.c_str());
  std::string cats;
  for (const auto& c : l.by_category) cats += (cats.empty() ? "" : " · ") + c.key + " " + bytes_label(c.bytes);
  ImGui::TextWrapped("%s", cats.c_str());
  ImGui::TextDisabled("%s", l.by_stacks ? "live by the line of your code" : "live by size class (no stacks recorded)");
  for (size_t k = 0; k < l.by_site.size() && k < 8; ++k)
    ImGui::BulletText("%s  %s%s%s", bytes_label(l.by_site[k].bytes).c_str(), l.by_site[k].key.c_str(),
                      l.by_site[k].categories.empty() ? "" : "  ",
                      l.by_site[k].categories.empty() ? "" : l.by_site[k].categories.front().first.c_str());
  std::string phases;
  for (size_t k = 0; k < l.by_phase.size() && k < 4; ++k)
    phases += (phases.empty() ? "" : " · ") + l.by_phase[k].key + " " + bytes_label(l.by_phase[k].bytes);
  ImGui::TextDisabled("by step and phase: %s", phases.c_str());
}

// The batch what-if (fraglab fit) from the --probe snapshots: the largest batch per setting.
void batch_answers(const FitReport& fit) {
  if (!ImGui::BeginTable("##fit", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) return;
  for (const char* c : {"setting", "largest batch that fits", "predicted peak reserved"}) ImGui::TableSetupColumn(c);
  ImGui::TableHeadersRow();
  for (const SettingAnswer& a : fit.answers) {
    uint64_t peak = 0;
    for (const BatchPoint& p : a.points)
      if (p.batch == a.largest_batch) peak = p.peak_reserved;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%s: %s", a.label.c_str(), a.conf.empty() ? "every default" : a.conf.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%llu", static_cast<unsigned long long>(a.largest_batch));
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(peak).c_str());
  }
  ImGui::EndTable();
  ImGui::TextDisabled("confidence: %s", fit.confidence.c_str());
}

void details(const AppState& app, const DiagnoseReport& r, const Diagnosis& d) {
  const MemoryState& st = d.state;
  if (d.request_bytes) {
    ImGui::Text("request %s   largest free range %s   %s", bytes_label(d.request_bytes).c_str(),
                bytes_label(st.largest_free).c_str(),
                st.largest_free >= d.request_bytes ? "(a hole was large enough)" : "(no hole large enough)");
  } else {
    ImGui::Text("at the peak: largest free range %s", bytes_label(st.largest_free).c_str());
  }
  // The cursor event whose fragmentation panel shows this state: the request's arrival for a recorded OOM,
  // else the event before the moment.
  uint64_t same_as_cursor_at = d.event_index ? d.event_index - 1 : 0;
  if (d.source == Diagnosis::Source::Recorded) {
    uint64_t freed = 0;
    uint64_t arrival = request_arrival_event(app.trace->trace, d.event_index, &freed);
    same_as_cursor_at = arrival;
    ImGui::PushTextWrapPos(0);
    if (freed)
      ImGui::TextDisabled(
          "as the request arrived (event %llu): the allocator then returned %s of cached segments trying to serve "
          "it, which the cursor on the OOM shows",
          static_cast<unsigned long long>(arrival), bytes_label(freed).c_str());
    ImGui::PopTextWrapPos();
  }
  // Measured as the fragmentation panel measures every lane (gui/model/free_space.h), so both agree.
  const FreeSpace space = free_space(st);
  const Fragmentation& f = space.frag;
  record_fragmentation(app.shown, "oom", "", {"before_event", d.event_index}, space);
  app.shown.set("oom.same_as_cursor_at", same_as_cursor_at);
  if (space.awaiting_streams) {
    ImGui::TextDisabled(
        "awaiting streams %s: freed by the program, held until the other streams that used them "
        "are done (record_stream); neither free nor in PyTorch's allocated_bytes",
        bytes_label(space.awaiting_streams).c_str());
  }
  ImGui::TextWrapped("reserved %s   allocated %s   free inside reserved %s   rounding waste %s   free ranges %llu",
                     bytes_label(f.reserved).c_str(), bytes_label(f.allocated).c_str(),
                     bytes_label(f.free_bytes).c_str(), bytes_label(rounding_waste(f, space.awaiting_streams)).c_str(),
                     static_cast<unsigned long long>(f.free_ranges));
  if (r.capacity)
    ImGui::Text("capacity %s: %s not reserved", bytes_label(*r.capacity).c_str(),
                bytes_label(*r.capacity > st.reserved ? *r.capacity - st.reserved : 0).c_str());
  if (d.served_in_replay)
    ImGui::TextColored({1, 0.8f, 0.3f, 1}, "the model serves this request here (it disagrees with the recording)");
  ImGui::Spacing();
  shares("free bytes by segment kind", d.free_by_kind, "ranges", 6);
  shares("free bytes by pool", d.free_by_pool, "ranges", 6);
  if (!d.could_serve.empty()) {
    ImGui::TextDisabled("segments whose free bytes would have served it as one range, and what pins them");
    for (size_t i = 0; i < d.could_serve.size() && i < 6; ++i) {
      const PinnedSegment& p = d.could_serve[i];
      const StateSegment& seg = st.segments[p.segment];
      ImGui::BulletText("%s segment 0x%llx, %s: %s free, largest %s", seg.kind.c_str(),
                        static_cast<unsigned long long>(seg.addr), bytes_label(seg.size).c_str(),
                        bytes_label(seg.free_bytes).c_str(), bytes_label(seg.largest_free).c_str());
      ImGui::Indent();
      for (size_t k = 0; k < p.pinned_by.size() && k < 4; ++k)
        ImGui::TextDisabled("pinned by %s in %llu blocks: %s", bytes_label(p.pinned_by[k].bytes).c_str(),
                            static_cast<unsigned long long>(p.pinned_by[k].count), p.pinned_by[k].key.c_str());
      ImGui::Unindent();
    }
  }
  shares(d.by_site ? "stranded free bytes by the call sites pinning them" : "stranded free bytes by pinning size class",
         d.stranded_by, "blocks", 8);
  holders(d);
}

}  // namespace

void draw_oom(AppState& app, ImVec2 size) {
  if (!app.trace) {
    ImGui::TextDisabled("Open a trace to diagnose its OOMs.");
    return;
  }
  OomDiagnosisRun& run = app.oom_run();
  if (std::string error = run.error(); !error.empty()) {
    ImGui::TextColored({1, 0.4f, 0.4f, 1}, "diagnose: %s", error.c_str());
    return;
  }
  auto report = run.report();
  if (!report) {
    ImGui::Text("Diagnosing (replaying to each OOM under pytorch) ...");
    return;
  }
  if (!run.capacity_note().empty()) ImGui::TextDisabled("%s", run.capacity_note().c_str());
  if (!report->note.empty()) ImGui::TextDisabled("%s", report->note.c_str());
  if (report->ooms.empty()) {
    ImGui::Text("No OOM to diagnose.");
    return;
  }
  size_t selected = selected_oom(app, *report);
  if (ImGui::Button("< OOM") && selected > 0) app.set_cursor(shown_event(report->ooms[selected - 1]));
  ImGui::SameLine();
  if (ImGui::Button("OOM >") && selected + 1 < report->ooms.size())
    app.set_cursor(shown_event(report->ooms[selected + 1]));
  ImGui::SameLine();
  ImGui::Text("%zu of %zu", selected + 1, report->ooms.size());
  ImGui::SameLine(0, 20);
  if (run.verdict_done()) {
    ImGui::TextWrapped("verdict: %s", report->verdict.text.c_str());
    if (report->verdict.fit) batch_answers(*report->verdict.fit);
  } else {
    ImGui::TextDisabled("searching the settings for the verdict ...");
  }
  float list_w = std::min(360.0f, size.x * 0.35f);
  ImGui::BeginChild("##oomlist", {list_w, 0}, false);
  oom_list(app, *report, selected, ImGui::GetContentRegionAvail().y);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("##oomdetail", {0, 0}, false);
  details(app, *report, report->ooms[selected]);
  ImGui::EndChild();
}

}  // namespace fraglab::gui
