// fraglab-gui's views, one row each: the --view name, the tab title, the draw function and
// the help line. The command line, the tabs, the number keys and the help view all read
// this table, so adding a view is adding a row (and its view_<name>.cpp).
#pragma once

#include <array>

#include "gui/views.h"

namespace fraglab::gui {

struct ViewEntry {
  ViewId id;
  const char* flag;   // --view NAME
  const char* title;  // the tab's
  void (*draw)(AppState&, ImVec2);
  const char* help;
};

// In tab order; the number keys 1.. select them in this order.
inline constexpr std::array<ViewEntry, 11> kViews{{
    {ViewId::BlockMap, "blockmap", "Block map", draw_blockmap_view,
     "the selected policy's device memory at the cursor, to scale; hover a block for its stack"},
    {ViewId::Memory, "memory", "Active memory", draw_memory,
     "every allocation of the trace as a band stacked over time; hover for its size, lifetime and stack"},
    {ViewId::Events, "events", "Events", draw_events,
     "the trace's entries around the cursor; search by address, size, action or frame text"},
    {ViewId::Oom, "oom", "OOMs", draw_oom,
     "fraglab diagnose at each OOM: largest hole vs. request, pinning blocks, the setting that fits"},
    {ViewId::Compare, "compare", "Compare", draw_compare,
     "every policy side by side at the cursor, with reserved bytes against the first"},
    {ViewId::Ranks, "ranks", "Ranks", draw_ranks,
     "a job's rank snapshots together: pick the rank the views show; every rank's timeline overlaid, the limit "
     "rank highlighted"},
    {ViewId::Summary, "summary", "Trace summary", draw_summary, "the trace's statistics and allocation sites"},
    {ViewId::Help, "help", "Help", draw_help, "keys and mouse actions"},
    {ViewId::Settings, "settings", "Settings", draw_settings,
     "the recording allocator's settings in full: recorded text, every parsed value, what was inferred"},
    {ViewId::Pools, "pools", "Pools", draw_pools,
     "the default and private pools (CUDA graphs, MemPool): segments and bytes at the cursor, peaks"},
    {ViewId::Segments, "segments", "Segments", draw_segments,
     "every cached segment and mapped range stacked over time (expandable maps and unmaps included)"},
}};

// --view names that mean a panel always on screen (kept for old command lines).
inline constexpr std::array<const char*, 2> kAlwaysShown{{"fragmentation", "timeline"}};

}  // namespace fraglab::gui
