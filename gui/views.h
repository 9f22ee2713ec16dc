// fraglab-gui's views: each draws itself from AppState into the current ImGui window
// region of the given size. One file a view (view_<name>.cpp).
#pragma once

#include <imgui.h>

#include "gui/app_state.h"
#include "gui/model/free_space.h"

namespace fraglab::gui {

void draw_toolbar(AppState& app);
void draw_timeline(AppState& app, ImVec2 size);
// The block map of `run` at its latest snapshot; `panel` keys the layout cache (one a place
// a map is drawn); `compact` draws thinner rows and a one-line header (compare view).
void draw_blockmap(AppState& app, const PolicyRun* run, int panel, ImVec2 size, bool compact);
void draw_blockmap_view(AppState& app, ImVec2 size);  // the primary policy's, full size
void draw_memory(AppState& app, ImVec2 size);
void draw_events(AppState& app, ImVec2 size);
void draw_oom(AppState& app, ImVec2 size);
void draw_fragmentation(AppState& app, ImVec2 size);
void draw_compare(AppState& app, ImVec2 size);
void draw_trace_pair(AppState& app, ImVec2 size);  // two traces (fraglab-gui A B), in the compare view
void draw_ranks(AppState& app, ImVec2 size);       // a set of rank snapshots (view_ranks.cpp)
void draw_summary(AppState& app, ImVec2 size);
void draw_help(AppState& app, ImVec2 size);
void draw_settings(AppState& app, ImVec2 size);
void draw_pools(AppState& app, ImVec2 size);
void draw_segments(AppState& app, ImVec2 size);
void draw_minimap(AppState& app, ImVec2 size);  // the whole trace under the timeline, the visible range boxed

// Shared helpers (view_common.cpp).
std::string bytes_label(uint64_t bytes);           // "14.24 GiB"
std::string signed_bytes_label(int64_t bytes);     // "+1.50 GiB" / "-512.00 MiB"
std::string duration_label(int64_t microseconds);  // "3.2 s", "41 ms"
ImU32 series_color(Series s);
const char* series_name(Series s);
// The block map's color of a block under the app's color mode.
uint32_t block_color(const AppState& app, const SnapshotBlock& b);
// The color of a stream's blocks, for --color stream.
uint32_t stream_color(StreamIndex stream);
// The colour of a MemoryCategory (report/program_attribution.h) in the category colouring.
uint32_t category_color(uint8_t category);
// The color of an allocation site (one of the first kSiteColors recorded sites, else grey).
uint32_t site_color(const TraceInfo& info, uint32_t site);
// The strip for `run`'s snapshot at this size and color mode, from the cache when it fits.
const BlockStrip& strip_for(AppState& app, const PolicyRun* run, int panel,
                            const std::shared_ptr<const CursorSnapshot>& snap, int width, int rows);
// Event range [begin, end) the timeline shows (zoom), clamped to the trace.
std::pair<double, double> visible_range(const AppState& app);
// Zooms the visible range by `factor` around event `anchor`; pans it by `shift` events.
void zoom_range(AppState& app, double begin, double end, double anchor, double factor);
void pan_range(AppState& app, double begin, double end, double shift);
// A row of color swatches with labels, the legend of the current color mode.
void color_legend(const AppState& app, bool with_free);
// The allocation behind alloc event `alloc_index`: size, lifetime, stream, pool and stack.
void allocation_details(const AppState& app, uint64_t alloc_index, size_t max_frames);
// The free-space numbers a view shows (reserved, allocated, requested, free in reserved, rounding waste,
// free ranges, largest free range), recorded under "VIEW" for --screenshot-numbers, with the moment: "event"
// (the state after it, as the cursor reads) or "before_event" (just before it, as the OOM view and `fraglab
// info --at` read a moment).
struct ShownMoment {
  const char* key;
  uint64_t event;
};
void record_fragmentation(ShownNumbers& shown, const std::string& view, const std::string& policy, ShownMoment moment,
                          const FreeSpace& space);
// Allocated - requested over the blocks in memory: PyTorch's active_bytes - requested_bytes, the blocks
// awaiting other streams included (gui/model/free_space.h).
inline uint64_t rounding_waste(const Fragmentation& f, uint64_t awaiting_streams) {
  return f.allocated + awaiting_streams - std::min(f.allocated + awaiting_streams, f.requested);
}
// Maps a column of a plot `width` pixels wide to the first event it covers (events or time axis).
uint64_t column_event(const AppState& app, double begin, double end, double column, double width);
// Plot area x for an event index: the center of the pixel column that draws it (see column_event).
double event_x(const AppState& app, double begin, double end, uint64_t event, double width);

}  // namespace fraglab::gui
