#include "gui/model/segment_timeline.h"

#include <algorithm>
#include <map>

#include "gui/model/palette.h"

namespace fraglab::gui {

std::vector<SegmentSpan> segment_spans(const Trace& trace) {
  std::vector<SegmentSpan> spans;
  std::map<Addr, size_t> live;  // start address -> span index
  const uint64_t n = trace.events.size();
  for (const RecordedSegment& s : trace.meta.initial.segments) {
    PoolIndex pool = 0;
    for (size_t i = 0; i < trace.meta.pools.size(); ++i)
      if (trace.meta.pools[i].id == s.pool_id) pool = static_cast<PoolIndex>(i);
    if (s.total_size == 0) continue;
    live[s.address] = spans.size();
    spans.push_back({s.address, s.total_size, 0, n, s.is_expandable, pool});
  }
  auto containing = [&](Addr a) -> SegmentSpan* {
    auto it = live.upper_bound(a);
    if (it == live.begin()) return nullptr;
    --it;
    SegmentSpan& s = spans[it->second];
    return a < s.addr + s.size ? &s : nullptr;
  };
  for (uint64_t i = 0; i < n; ++i) {
    const Event& e = trace.events[i];
    switch (e.kind) {
      case EventKind::SegmentAlloc:
      case EventKind::SegmentMap:
        if (e.size == 0) break;
        live[e.addr] = spans.size();
        spans.push_back({e.addr, e.size, i, n, e.kind == EventKind::SegmentMap, 0});
        break;
      case EventKind::SegmentFree:
      case EventKind::SegmentUnmap: {
        const Addr cut0 = e.addr, cut1 = e.addr + e.size;
        auto it = live.upper_bound(cut0);
        if (it != live.begin()) --it;
        while (it != live.end() && it->first < cut1) {
          SegmentSpan s = spans[it->second];
          if (s.addr + s.size <= cut0) {
            ++it;
            continue;
          }
          spans[it->second].end = i;
          it = live.erase(it);
          // What the cut leaves of the span goes on as new spans (pages unmapped from the middle of a run).
          if (s.addr < cut0) {
            live[s.addr] = spans.size();
            spans.push_back({s.addr, cut0 - s.addr, i, n, s.vmm, s.pool});
          }
          if (cut1 < s.addr + s.size) {
            live[cut1] = spans.size();
            spans.push_back({cut1, s.addr + s.size - cut1, i, n, s.vmm, s.pool});
            break;
          }
        }
        break;
      }
      case EventKind::Alloc:
        if (e.pool != 0)
          if (SegmentSpan* s = containing(e.addr)) s->pool = e.pool;
        break;
      default:
        break;
    }
  }
  return spans;
}

SegmentRaster build_segment_raster(const std::vector<SegmentSpan>& spans, uint64_t events,
                                   const std::function<uint64_t(int)>& first_of, int width, int height) {
  SegmentRaster out;
  out.width = std::max(width, 1);
  out.height = std::max(height, 1);
  const auto w = static_cast<size_t>(out.width), h = static_cast<size_t>(out.height);
  out.rgba.assign(w * h, rgba(24, 26, 30));
  out.column_event.assign(w, 0);
  out.column_reserved.assign(w, 0);
  out.column_first_span.assign(w, -1);
  if (events == 0 || spans.empty()) return out;
  // Reserved bytes after each event, from the spans' starts and ends.
  std::vector<int64_t> delta(events + 1, 0);
  for (const SegmentSpan& s : spans) {
    delta[std::min(s.begin, events)] += static_cast<int64_t>(s.size);
    delta[std::min(s.end, events)] -= static_cast<int64_t>(s.size);
  }
  std::vector<uint64_t> reserved(events);
  int64_t sum = 0;
  for (uint64_t i = 0; i < events; ++i) reserved[i] = static_cast<uint64_t>(sum += delta[i]);
  uint64_t top = 1;
  uint64_t next = std::min(first_of(0), events - 1);
  for (size_t c = 0; c < w; ++c) {
    uint64_t first = next;
    next = std::min(first_of(static_cast<int>(c) + 1), events - 1);
    uint64_t last = std::max(next, first + 1), best = first;
    for (uint64_t i = first; i < last && i < events; ++i)
      if (reserved[i] > reserved[best]) best = i;
    out.column_event[c] = best;
    out.column_reserved[c] = reserved[best];
    top = std::max(top, reserved[best]);
  }
  out.top_bytes = top + top / 20;
  const double rows_per_byte = static_cast<double>(h) / static_cast<double>(out.top_bytes);
  for (size_t c = 0; c < w; ++c) {
    const uint64_t e = out.column_event[c];
    double offset = 0;
    for (size_t k = 0; k < spans.size(); ++k) {
      const SegmentSpan& s = spans[k];
      if (s.begin > e || s.end <= e) continue;
      if (out.column_first_span[c] < 0) out.column_first_span[c] = static_cast<int32_t>(k);
      uint32_t color = pool_color(s.pool);
      if (k % 2) color = blend(color, rgba(0, 0, 0), 0.75);  // neighbours part
      if (s.vmm) color = blend(color, rgba(255, 255, 255), 0.7);
      auto y0 = static_cast<size_t>(offset * rows_per_byte);
      offset += static_cast<double>(s.size);
      auto y1 = std::min(h, static_cast<size_t>(offset * rows_per_byte + 0.5));
      if (y1 <= y0) y1 = std::min(h, y0 + 1);  // a segment thinner than a row still shows
      for (size_t y = y0; y < y1; ++y) out.rgba[(h - 1 - y) * w + c] = color;
    }
  }
  return out;
}

int64_t span_at(const std::vector<SegmentSpan>& spans, const SegmentRaster& raster, int column, uint64_t bytes) {
  if (column < 0 || static_cast<size_t>(column) >= raster.column_event.size()) return -1;
  const uint64_t e = raster.column_event[static_cast<size_t>(column)];
  uint64_t offset = 0;
  for (size_t k = 0; k < spans.size(); ++k) {
    const SegmentSpan& s = spans[k];
    if (s.begin > e || s.end <= e) continue;
    if (bytes < offset + s.size) return static_cast<int64_t>(k);
    offset += s.size;
  }
  return -1;
}

}  // namespace fraglab::gui
