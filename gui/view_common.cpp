// Helpers the views share: labels, series colors, block colors and the strip cache.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "allocators/policy_options.h"
#include "gui/model/palette.h"
#include "gui/views.h"
#include "report/program_attribution.h"

namespace fraglab::gui {

std::string bytes_label(uint64_t bytes) { return format_size(bytes); }

std::string signed_bytes_label(int64_t bytes) {
  if (bytes == 0) return "0 B";
  return (bytes < 0 ? "-" : "+") + format_size(static_cast<uint64_t>(bytes < 0 ? -bytes : bytes));
}

std::string duration_label(int64_t us) {
  double a = std::abs(static_cast<double>(us));
  if (a >= 1e6) return fmt::format("{:.2f} s", static_cast<double>(us) / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f} ms", static_cast<double>(us) / 1e3);
  return fmt::format("{} us", us);
}

ImU32 series_color(Series s) {
  switch (s) {
    case Series::Requested:
      return IM_COL32(120, 200, 120, 255);
    case Series::Allocated:
      return IM_COL32(90, 160, 240, 255);
    case Series::Reserved:
      return IM_COL32(250, 160, 60, 255);
  }
  return IM_COL32_WHITE;
}

const char* series_name(Series s) {
  switch (s) {
    case Series::Requested:
      return "requested";
    case Series::Allocated:
      return "allocated";
    case Series::Reserved:
      return "reserved";
  }
  return "?";
}

uint32_t block_color(const AppState& app, const SnapshotBlock& b) {
  switch (app.color) {
    case ColorMode::Size:
      return size_class_color(b.size);
    case ColorMode::Age: {
      // Square root: recent allocations differ most and get most of the gradient.
      double age = app.cursor > b.alloc_index ? static_cast<double>(app.cursor - b.alloc_index) : 0.0;
      return age_color(std::sqrt(age / std::max<double>(1.0, static_cast<double>(app.cursor))));
    }
    case ColorMode::Site: {
      const TraceInfo& info = *app.trace;
      uint32_t site =
          b.alloc_index < info.events() ? info.site_of(info.trace.events[b.alloc_index]) : info.no_stack_site;
      return site_color(info, site);
    }
    case ColorMode::Pool: {
      const TraceInfo& info = *app.trace;
      return pool_color(b.alloc_index < info.events() ? info.trace.events[b.alloc_index].pool : 0);
    }
    case ColorMode::Stream:
      return stream_color(b.stream);
    case ColorMode::Category: {
      const TraceInfo& info = *app.trace;
      return b.alloc_index < info.categories.size() ? category_color(info.categories[b.alloc_index]) : kNoSiteColor;
    }
  }
  return kNoSiteColor;
}

// One colour per category (report/program_attribution.h), the model's own (parameters, optimizer state) cool,
// what a step holds (activations, gradients) warm, the transient grey-blue.
uint32_t category_color(uint8_t category) {
  static constexpr uint32_t kColors[kMemoryCategories] = {IM_COL32(70, 110, 220, 255),  IM_COL32(230, 150, 40, 255),
                                                          IM_COL32(130, 80, 200, 255),  IM_COL32(220, 70, 70, 255),
                                                          IM_COL32(140, 160, 180, 255), IM_COL32(60, 170, 120, 255),
                                                          IM_COL32(200, 200, 90, 255)};
  return category < kMemoryCategories ? kColors[category] : kNoSiteColor;
}

uint32_t stream_color(StreamIndex stream) { return kSiteColors[stream % kSiteColors.size()]; }

namespace {

// One legend entry; wraps to a new line when it would pass the window's right edge.
void swatch(uint32_t color, const std::string& label, const std::string& tooltip = "") {
  float s = ImGui::GetTextLineHeight() - 2;
  float width = s + 3 + ImGui::CalcTextSize(label.c_str()).x;
  float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  ImGui::SameLine(0, 10);
  if (ImGui::GetCursorScreenPos().x + width > right) ImGui::NewLine();
  ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled({p.x, p.y + 1}, {p.x + s, p.y + 1 + s}, color);
  ImGui::Dummy({s, s});
  ImGui::SameLine(0, 3);
  ImGui::TextUnformatted(label.c_str());
  if (!tooltip.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tooltip.c_str());
}

std::string shortened(const std::string& text, size_t most) {
  return text.size() <= most ? text : text.substr(0, most - 3) + "...";
}

}  // namespace

void color_legend(const AppState& app, bool with_free) {
  ImGui::Dummy({0, 0});  // the swatches continue this line
  if (with_free) {
    swatch(kFreeColor, "free");
    swatch(kUnmappedColor, "unmapped");
  }
  switch (app.color) {
    case ColorMode::Size:
      for (const auto& c : kSizeClasses) swatch(c.color, c.label);
      break;
    case ColorMode::Age:
      swatch(age_color(0), "new");
      swatch(age_color(0.25), "");
      swatch(age_color(0.5), "");
      swatch(age_color(0.75), "");
      swatch(age_color(1), "oldest");
      break;
    case ColorMode::Site: {
      // Every site that has a color of its own, so the legend names each color the map shows.
      const TraceInfo& info = *app.trace;
      for (size_t i = 0; i < info.sites.size(); ++i) {
        int slot = info.color_slot(static_cast<uint32_t>(i));
        if (slot < 0 || slot >= static_cast<int>(kSiteColors.size())) continue;
        const AllocSite& site = info.sites[i];
        swatch(kSiteColors[static_cast<size_t>(slot)], shortened(site.label, 36),
               fmt::format("{}\n{} allocated in {} allocations", site.label, bytes_label(site.bytes), site.count));
      }
      swatch(kNoSiteColor, info.has_stacks ? "other sites, no stack" : "no stacks in this trace");
      break;
    }
    case ColorMode::Pool: {
      const auto& pools = app.trace->trace.meta.pools;
      swatch(pool_color(0), "default pools");
      for (size_t i = 1; i < pools.size(); ++i)
        swatch(pool_color(static_cast<PoolIndex>(i)), "pool " + pool_name(pools[i]), pool_origin(pools[i]));
      break;
    }
    case ColorMode::Category:
      for (int c = 0; c < kMemoryCategories; ++c)
        swatch(category_color(static_cast<uint8_t>(c)), category_name(static_cast<MemoryCategory>(c)));
      break;
    case ColorMode::Stream: {
      const auto& streams = app.trace->trace.meta.streams;
      for (size_t i = 0; i < streams.size() && i < kSiteColors.size(); ++i)
        swatch(stream_color(static_cast<StreamIndex>(i)), fmt::format("stream {:#x}", streams[i]));
      break;
    }
  }
}

void allocation_details(const AppState& app, uint64_t alloc_index, size_t max_frames) {
  const TraceInfo& info = *app.trace;
  if (alloc_index >= info.events()) return;
  const Event& alloc = info.trace.events[alloc_index];
  ImGui::Text("requested %s, allocation id %u, allocated at event %llu", bytes_label(alloc.size).c_str(), alloc.id,
              static_cast<unsigned long long>(alloc_index));
  const auto& streams = info.trace.meta.streams;
  const auto& pools = info.trace.meta.pools;
  ImGui::Text("stream %#llx, pool %s",
              static_cast<unsigned long long>(alloc.stream < streams.size() ? streams[alloc.stream] : 0),
              alloc.pool < pools.size() ? pool_name(pools[alloc.pool]).c_str() : "?");
  if (const std::string* context = info.trace.meta.compile_context_of(alloc))  // compile_context=True recordings
    ImGui::Text("compile context: %s", context->c_str());
  if (alloc.addr != 0) {
    // MemoryViz's versioned address: how many allocations had this address before this one.
    static const TraceInfo* cached_trace = nullptr;
    static uint64_t cached_index = UINT64_MAX, cached_version = 0;
    if (cached_trace != &info || cached_index != alloc_index) {
      cached_version = 0;
      for (uint64_t i = 0; i < alloc_index; ++i)
        cached_version += info.trace.events[i].kind == EventKind::Alloc && info.trace.events[i].addr == alloc.addr;
      cached_trace = &info, cached_index = alloc_index;
    }
    ImGui::Text("address 0x%llx_%llu (version %llu of this address)", static_cast<unsigned long long>(alloc.addr),
                static_cast<unsigned long long>(cached_version), static_cast<unsigned long long>(cached_version));
  }
  if (const RunResult* r = app.primary_result(); r && alloc_index < r->series[0].size())
    ImGui::Text("after this allocation (%s): %s requested, %s allocated, %s reserved",
                app.primary_run()->spec().c_str(), bytes_label(r->series[0].bytes_at(alloc_index)).c_str(),
                bytes_label(r->series[1].bytes_at(alloc_index)).c_str(),
                bytes_label(r->series[2].bytes_at(alloc_index)).c_str());
  if (alloc_index < info.categories.size() && info.categories[alloc_index] < kMemoryCategories)
    ImGui::Text("category: %s (inferred from %s)",
                category_name(static_cast<MemoryCategory>(info.categories[alloc_index])),
                info.has_stacks ? "its stack and lifetime" : "its lifetime: no stacks recorded");
  uint64_t freed = info.free_index[alloc_index];
  if (freed == TraceInfo::kNever) {
    ImGui::Text("lifetime: never freed (live to the end of the trace)");
  } else {
    ImGui::Text("lifetime: freed at event %llu, %llu events, %s", static_cast<unsigned long long>(freed),
                static_cast<unsigned long long>(freed - alloc_index),
                duration_label(info.time_at(freed) - alloc.time_us).c_str());
  }
  const auto& stacks = info.trace.meta.stacks;
  if (alloc.stack == 0 || alloc.stack >= stacks.size()) {
    ImGui::TextDisabled(info.has_stacks ? "no stack recorded for this allocation" : "no stacks in this trace");
    return;
  }
  ImGui::Separator();
  ImGui::Text("site: %s", info.sites[info.site_of(alloc)].label.c_str());
  const auto& frames = stacks[alloc.stack];
  for (size_t i = 0; i < frames.size() && i < max_frames; ++i)
    ImGui::TextDisabled("  %s  %s:%lld", frames[i].name.c_str(), frames[i].filename.c_str(),
                        static_cast<long long>(frames[i].line));
  if (frames.size() > max_frames) ImGui::TextDisabled("  ... %zu more frames", frames.size() - max_frames);
}

void record_fragmentation(ShownNumbers& shown, const std::string& view, const std::string& policy, ShownMoment moment,
                          const FreeSpace& space) {
  const Fragmentation& f = space.frag;
  nlohmann::json j = {{moment.key, moment.event},         {"reserved", f.reserved},
                      {"allocated", f.allocated},         {"requested", f.requested},
                      {"free_in_reserved", f.free_bytes}, {"rounding_waste", rounding_waste(f, space.awaiting_streams)},
                      {"free_ranges", f.free_ranges},     {"largest_free_range", f.largest_free}};
  if (!policy.empty()) j["policy"] = policy;
  if (space.awaiting_streams) j["awaiting_streams"] = space.awaiting_streams;
  shown.set(view, std::move(j));
}

void zoom_range(AppState& app, double begin, double end, double anchor, double factor) {
  double n = static_cast<double>(app.trace->events());
  double span = std::clamp((end - begin) * factor, std::min(n, 32.0), n);
  double b = anchor - (anchor - begin) * (span / (end - begin));
  b = std::clamp(b, 0.0, n - span);
  app.timeline.begin = b;
  app.timeline.end = b + span;
  if (app.timeline.begin <= 0 && app.timeline.end >= n) app.timeline.begin = app.timeline.end = 0;
}

void pan_range(AppState& app, double begin, double end, double shift) {
  double n = static_cast<double>(app.trace->events());
  if (end - begin >= n) return;
  double b = std::clamp(begin + shift, 0.0, n - (end - begin));
  app.timeline.begin = b;
  app.timeline.end = b + (end - begin);
}

uint32_t site_color(const TraceInfo& info, uint32_t site) {
  int slot = info.color_slot(site);
  return slot >= 0 && slot < static_cast<int>(kSiteColors.size()) ? kSiteColors[static_cast<size_t>(slot)]
                                                                  : kNoSiteColor;
}

const BlockStrip& strip_for(AppState& app, const PolicyRun* run, int panel,
                            const std::shared_ptr<const CursorSnapshot>& snap, int width, int rows) {
  StripCache& cache = app.strips[{run, panel}];
  if (cache.snap != snap || cache.width != width || cache.rows != rows || cache.color != app.color) {
    cache.snap = snap;
    cache.width = width;
    cache.rows = rows;
    cache.color = app.color;
    cache.strip = build_block_strip(*snap, width, rows, [&](const SnapshotBlock& b) { return block_color(app, b); });
  }
  return cache.strip;
}

std::pair<double, double> visible_range(const AppState& app) {
  double n = app.trace ? static_cast<double>(app.trace->events()) : 0.0;
  double b = app.timeline.begin, e = app.timeline.end;
  if (e <= b) return {0.0, n};
  b = std::clamp(b, 0.0, n);
  e = std::clamp(e, b + 1, std::max(n, b + 1));
  return {b, e};
}

uint64_t column_event(const AppState& app, double begin, double end, double column, double width) {
  double f = width > 0 ? column / width : 0.0;
  if (app.timeline.axis == TimeAxis::Time && app.trace && app.trace->events() > 0) {
    auto t0 = static_cast<double>(app.trace->time_at(static_cast<uint64_t>(begin)));
    auto t1 = static_cast<double>(app.trace->time_at(static_cast<uint64_t>(std::max(begin, end - 1))));
    uint64_t i = app.trace->index_at_time(static_cast<int64_t>(t0 + (t1 - t0) * f));
    return std::clamp<uint64_t>(i, static_cast<uint64_t>(begin), static_cast<uint64_t>(end));
  }
  return static_cast<uint64_t>(begin + (end - begin) * f);
}

double event_x(const AppState& app, double begin, double end, uint64_t event, double width) {
  // The center of the pixel column that draws the event (the plots draw column c from column_event(c)).
  auto first_of = [&](int c) { return column_event(app, begin, end, static_cast<double>(c), width); };
  return event_column_center(first_of, static_cast<int>(width), event);
}

}  // namespace fraglab::gui
