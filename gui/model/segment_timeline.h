// The cached-segment timeline: every segment the allocator held, stacked over time, as PyTorch's
// MemoryViz draws its "Active Cached Segment Timeline", with the page maps and unmaps of expandable
// segments included (MemoryViz skips them: an expandable segment's memory there never changes).
//
// A span is one cudaMalloc'd segment from its segment_alloc (or the history's start, for a segment of
// the initial state) to its segment_free, or one run of pages mapped into an expandable segment from
// its segment_map to the unmap that takes it back (an unmap of part of a run ends it there and the
// rest goes on as a new span). At each moment the live spans stack in the order they were made, oldest
// at the bottom, each as tall as its bytes, so the stack's height is the reserved bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gui/model/trace_info.h"

namespace fraglab::gui {

struct SegmentSpan {
  Addr addr = 0;
  uint64_t size = 0;
  uint64_t begin = 0, end = 0;  // live after events [begin, end); end = the trace's events when never freed
  bool vmm = false;             // pages of an expandable segment
  PoolIndex pool = 0;           // a private pool's, where its blocks were seen in it
};

// Every span of the trace, in the order they were made.
std::vector<SegmentSpan> segment_spans(const Trace& trace);

struct SegmentRaster {
  int width = 0, height = 0;
  uint64_t top_bytes = 1;                  // bytes at the top row
  std::vector<uint32_t> rgba;              // width * height, top row first (palette.h packing)
  std::vector<uint64_t> column_event;      // the event each column shows (its highest reserved bytes)
  std::vector<uint64_t> column_reserved;   // the bytes stacked there
  std::vector<int32_t> column_first_span;  // the oldest span live there (-1: none)
};

// The picture of `spans` (segment_spans) over columns whose first events are first_of(0..width): each
// column shows the moment of its highest reserved bytes; spans in their pool's color, alternately
// shaded so neighbours part, expandable pages lighter.
SegmentRaster build_segment_raster(const std::vector<SegmentSpan>& spans, uint64_t events,
                                   const std::function<uint64_t(int)>& first_of, int width, int height);

// The span drawn at column `column`, `bytes` above the bottom; -1 for none.
int64_t span_at(const std::vector<SegmentSpan>& spans, const SegmentRaster& raster, int column, uint64_t bytes);

}  // namespace fraglab::gui
