// Helpers the views share: labels, series colors, block colors and the strip cache.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "allocators/policy_options.h"
#include "gui/model/palette.h"
#include "gui/views.h"

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
    case Series::Requested: return IM_COL32(120, 200, 120, 255);
    case Series::Allocated: return IM_COL32(90, 160, 240, 255);
    case Series::Reserved: return IM_COL32(250, 160, 60, 255);
  }
  return IM_COL32_WHITE;
}

const char* series_name(Series s) {
  switch (s) {
    case Series::Requested: return "requested";
    case Series::Allocated: return "allocated";
    case Series::Reserved: return "reserved";
  }
  return "?";
}

uint32_t block_color(const AppState& app, const SnapshotBlock& b) {
  switch (app.color) {
    case ColorMode::Size: return size_class_color(b.size);
    case ColorMode::Age: {
      // Square root: recent allocations differ most and get most of the gradient.
      double age = app.cursor > b.alloc_index ? static_cast<double>(app.cursor - b.alloc_index) : 0.0;
      return age_color(std::sqrt(age / std::max<double>(1.0, static_cast<double>(app.cursor))));
    }
    case ColorMode::Site: {
      const TraceInfo& info = *app.trace;
      uint32_t site = b.alloc_index < info.events() ? info.site_of(info.trace.events[b.alloc_index]) : info.no_stack_site;
      return site_color(info, site);
    }
    case ColorMode::Pool: {
      const TraceInfo& info = *app.trace;
      return pool_color(b.alloc_index < info.events() ? info.trace.events[b.alloc_index].pool : 0);
    }
  }
  return kNoSiteColor;
}

uint32_t pool_color(PoolIndex pool) {
  return pool == 0 ? kNoSiteColor : kSiteColors[static_cast<size_t>(pool - 1) % kSiteColors.size()];
}

uint32_t site_color(const TraceInfo& info, uint32_t site) {
  int slot = info.color_slot(site);
  return slot >= 0 && slot < static_cast<int>(kSiteColors.size()) ? kSiteColors[static_cast<size_t>(slot)] : kNoSiteColor;
}

const BlockStrip& strip_for(AppState& app, const PolicyRun* run, int panel, const std::shared_ptr<const CursorSnapshot>& snap,
                            int width, int rows) {
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
  if (app.timeline.axis == TimeAxis::Time && app.trace && app.trace->events() > 0) {
    auto t0 = static_cast<double>(app.trace->time_at(static_cast<uint64_t>(begin)));
    auto t1 = static_cast<double>(app.trace->time_at(static_cast<uint64_t>(std::max(begin, end - 1))));
    auto t = static_cast<double>(app.trace->time_at(event));
    return t1 > t0 ? (t - t0) / (t1 - t0) * width : 0.0;
  }
  return end > begin ? (static_cast<double>(event) - begin) / (end - begin) * width : 0.0;
}

}  // namespace fraglab::gui
