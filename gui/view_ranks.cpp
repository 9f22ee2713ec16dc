// The ranks view: a job's per-rank snapshots together (fraglab-gui DIR, or a_rank0 a_rank1 ...). A row per
// rank (click one: the other views show that rank's snapshot), the rank that reaches the limit first
// highlighted with its reason, and every rank's timeline overlaid in the job's clock order: reserved bytes (solid)
// and live bytes (faint), the limit rank drawn thick, a tick where a rank's allocations first differ from
// rank 0's.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "gui/views.h"

namespace fraglab::gui {

namespace {

constexpr ImU32 kLimitColor = IM_COL32(240, 90, 70, 255);

ImU32 rank_color(size_t k, size_t n, bool limit, int alpha) {
  if (limit) return (kLimitColor & 0x00FFFFFFu) | (static_cast<ImU32>(alpha) << 24);
  // Blues and greens for the rest, spread over the set.
  float h = 0.33f + 0.35f * static_cast<float>(k) / static_cast<float>(std::max<size_t>(n, 2) - 1);
  ImColor c = ImColor::HSV(h, 0.55f, 0.95f);
  c.Value.w = static_cast<float>(alpha) / 255.0f;
  return c;
}

void select_rank(AppState& app, const RankRun& k) {
  if (app.rank_shown == k.rank) return;
  app.rank_shown = k.rank;
  app.path_field = k.path;
  app.open(k.path);
}

void rank_table(AppState& app, const RanksReport& r) {
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("##ranks", 8, flags)) return;
  for (const char* h :
       {"rank", "device", "recorded peak", "live bound", "capacity", "OOMs", "fidelity", "against rank 0"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const RankRun& k = r.ranks[i];
    ImGui::TableNextRow();
    if (k.rank == r.limit_rank) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, IM_COL32(120, 40, 30, 160));
    ImGui::TableNextColumn();
    std::string label = "rank " + std::to_string(k.rank) + (k.rank == r.limit_rank ? "  (limit)" : "");
    ImGui::PushStyleColor(ImGuiCol_Text, rank_color(i, r.ranks.size(), k.rank == r.limit_rank, 255));
    if (ImGui::Selectable(label.c_str(), app.rank_shown == k.rank, ImGuiSelectableFlags_SpanAllColumns))
      select_rank(app, k);
    ImGui::PopStyleColor();
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s\nclick: the other views show this rank", k.path.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%d", k.device);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(k.run.recorded_peak_reserved).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes_label(k.run.live_bytes_bound).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(k.run.capacity ? bytes_label(*k.run.capacity).c_str() : "unlimited");
    ImGui::TableNextColumn();
    ImGui::Text("%llu", static_cast<unsigned long long>(k.run.recorded_ooms));
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(k.fidelity_exact ? "exact" : k.fidelity_note.c_str());
    ImGui::TableNextColumn();
    const RankDivergence* d = nullptr;
    for (const auto& x : r.divergence)
      if (x.rank == k.rank) d = &x;
    if (!d)
      ImGui::TextUnformatted("(reference)");
    else if (d->same)
      ImGui::Text("the same %llu allocations", static_cast<unsigned long long>(d->allocs));
    else
      ImGui::Text("differs at allocation %llu (event %llu): %s vs %s",
                  static_cast<unsigned long long>(d->alloc_ordinal), static_cast<unsigned long long>(d->event_index),
                  bytes_label(d->size).c_str(), bytes_label(d->reference_size).c_str());
  }
  ImGui::EndTable();
}

// Every rank's timeline overlaid: x the job's clock, y bytes.
void overlay(const RanksReport& r, ImVec2 size) {
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  double ymax = 1;
  for (const auto& k : r.ranks) {
    for (const RankPoint& p : k.timeline) {
      t0 = std::min(t0, p.time_us);
      t1 = std::max(t1, p.time_us);
      ymax = std::max({ymax, static_cast<double>(p.reserved), static_cast<double>(p.live)});
    }
    if (k.run.capacity) ymax = std::max(ymax, static_cast<double>(*k.run.capacity));
  }
  if (t0 >= t1 || size.x < 80 || size.y < 60) return;
  ymax *= 1.05;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 o = ImGui::GetCursorScreenPos();
  const float left = 70, bottom = 18;
  ImVec2 a{o.x + left, o.y + 4}, b{o.x + size.x - 8, o.y + size.y - bottom};
  dl->AddRectFilled(a, b, IM_COL32(25, 27, 32, 255));
  // x: the job's events in clock order, every rank's together (startup and waits take no room; the ranks'
  // order in time is kept, so a rank that runs ahead or allocates more shows where it does).
  std::vector<int64_t> clock;
  for (const auto& k : r.ranks)
    for (const RankPoint& p : k.timeline) clock.push_back(p.time_us);
  std::sort(clock.begin(), clock.end());
  clock.erase(std::unique(clock.begin(), clock.end()), clock.end());
  auto X = [&](int64_t t) {
    double i = static_cast<double>(std::lower_bound(clock.begin(), clock.end(), t) - clock.begin());
    return a.x + static_cast<float>(i / static_cast<double>(std::max<size_t>(clock.size() - 1, 1))) * (b.x - a.x);
  };
  auto Y = [&](double v) { return b.y - static_cast<float>(v / ymax) * (b.y - a.y); };
  for (int g = 1; g <= 4; ++g) {  // gridlines with byte labels
    double v = ymax * g / 4.0;
    dl->AddLine({a.x, Y(v)}, {b.x, Y(v)}, IM_COL32(60, 60, 70, 255));
    std::string l = bytes_label(static_cast<uint64_t>(v));
    dl->AddText({o.x + 2, Y(v) - 7}, IM_COL32(170, 170, 170, 255), l.c_str());
  }
  std::string span = "every rank's events in the job's clock order (idle time left out); " + duration_label(t1 - t0) +
                     " from first to last";
  dl->AddText({a.x, b.y + 2}, IM_COL32(170, 170, 170, 255), span.c_str());
  for (const auto& k : r.ranks)
    if (k.run.capacity) {
      float y = Y(static_cast<double>(*k.run.capacity));
      for (float x = a.x; x < b.x; x += 12) dl->AddLine({x, y}, {std::min(x + 6, b.x), y}, IM_COL32(220, 200, 80, 200));
    }
  // The limit rank last, so it is drawn on top.
  std::vector<size_t> order;
  for (size_t i = 0; i < r.ranks.size(); ++i)
    if (r.ranks[i].rank != r.limit_rank) order.push_back(i);
  for (size_t i = 0; i < r.ranks.size(); ++i)
    if (r.ranks[i].rank == r.limit_rank) order.push_back(i);
  for (size_t i : order) {
    const RankRun& k = r.ranks[i];
    bool limit = k.rank == r.limit_rank;
    for (int pass = 0; pass < 2; ++pass) {  // live (faint), then reserved
      ImU32 c = rank_color(i, r.ranks.size(), limit, pass == 0 ? 110 : 255);
      float thick = pass == 0 ? 1.0f : limit ? 2.6f : 1.4f;
      for (size_t p = 1; p < k.timeline.size(); ++p) {
        const RankPoint &u = k.timeline[p - 1], &v = k.timeline[p];
        double yu = pass == 0 ? static_cast<double>(u.live) : static_cast<double>(u.reserved);
        double yv = pass == 0 ? static_cast<double>(v.live) : static_cast<double>(v.reserved);
        dl->AddLine({X(u.time_us), Y(yu)}, {X(v.time_us), Y(yu)}, c, thick);  // a step: held until the next event
        dl->AddLine({X(v.time_us), Y(yu)}, {X(v.time_us), Y(yv)}, c, thick);
      }
    }
    if (k.first_oom_time_us != INT64_MAX) {
      float x = X(k.first_oom_time_us);
      dl->AddLine({x, a.y}, {x, b.y}, kLimitColor, 1.5f);
      std::string l = "rank " + std::to_string(k.rank) + " OOM";
      float w = ImGui::CalcTextSize(l.c_str()).x;
      dl->AddText({x + 3 + w > b.x ? x - 3 - w : x + 3, a.y + 22}, kLimitColor, l.c_str());
    }
    for (const auto& d : r.divergence) {  // where this rank's allocations first differ from rank 0's
      if (d.rank != k.rank || d.same) continue;
      auto it = std::lower_bound(k.timeline.begin(), k.timeline.end(), d.event_index,
                                 [](const RankPoint& p, uint64_t e) { return p.event < e; });
      if (it == k.timeline.end()) continue;
      float x = X(it->time_us);
      dl->AddTriangleFilled({x, b.y - 10}, {x - 5, b.y}, {x + 5, b.y}, rank_color(i, r.ranks.size(), limit, 255));
    }
  }
  // Legend.
  float lx = a.x + 8, ly = a.y + 6;
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    bool limit = r.ranks[i].rank == r.limit_rank;
    std::string l = "rank " + std::to_string(r.ranks[i].rank) + (limit ? " (limit)" : "");
    dl->AddRectFilled({lx, ly + 3}, {lx + 10, ly + 11}, rank_color(i, r.ranks.size(), limit, 255));
    dl->AddText({lx + 14, ly}, IM_COL32(230, 230, 230, 255), l.c_str());
    lx += ImGui::CalcTextSize(l.c_str()).x + 30;
  }
  dl->AddText({lx, ly}, IM_COL32(170, 170, 170, 255),
              "solid: reserved (recorded)   faint: live   dashes: capacity   ticks: first differs from rank 0");
  ImGui::Dummy(size);
}

}  // namespace

void draw_ranks(AppState& app, ImVec2 size) {
  if (!app.ranks) {
    ImGui::TextWrapped(
        "No rank set open. A job's per-rank snapshots open together: fraglab-gui DIR (one job's dumps) or "
        "fraglab-gui job_rank0.pickle.gz job_rank1.pickle.gz ... (files named rankN).");
    return;
  }
  auto report = app.ranks->report();
  if (!report) {
    if (!app.ranks->settled())
      ImGui::Text("reading %zu rank snapshots ...", app.ranks->files().size());
    else
      ImGui::TextColored(ImVec4(1, 0.4f, 0.3f, 1), "%s", app.ranks->error().c_str());
    return;
  }
  const RanksReport& r = *report;
  ImGui::PushStyleColor(ImGuiCol_Text, kLimitColor);
  ImGui::TextWrapped("The limit: %s", r.limit_reason.c_str());
  ImGui::PopStyleColor();
  rank_table(app, r);
  ImVec2 avail = ImGui::GetContentRegionAvail();
  overlay(r, {std::min(avail.x, size.x), std::max(avail.y - 4, 60.0f)});
}

}  // namespace fraglab::gui
