// The models behind the views issue 41 adds: the cached-segment timeline (every segment and mapped
// range stacked over time) and the private pools.
#include <catch2/catch.hpp>

#include <map>

#include "gui/model/pool_usage.h"
#include "gui/model/recorded_run.h"
#include "gui/model/segment_timeline.h"

using namespace fraglab;
using namespace fraglab::gui;

namespace {
const std::string kSnapshots = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/";
}

TEST_CASE("segment timeline: the live spans add up to the recording's reserved bytes at every event",
          "[gui][segments]") {
  for (const char* file : {"graphs_two_pools.default.pickle.gz", "gpt2_train.expandable_late2.pickle.gz",
                           "bert_varlen_train.default_ring60000.pickle.gz", "mempool_kept.expandable.pickle.gz"}) {
    INFO(file);
    auto info = load_trace_info(kSnapshots + file);
    std::vector<SegmentSpan> spans = segment_spans(info->trace);
    REQUIRE(!spans.empty());
    const uint64_t n = info->events();
    std::vector<int64_t> delta(n + 1, 0);
    for (const SegmentSpan& s : spans) {
      REQUIRE(s.begin <= s.end);
      delta[s.begin] += static_cast<int64_t>(s.size);
      delta[s.end] -= static_cast<int64_t>(s.size);
    }
    RecordedState state(info->trace, false);
    int64_t reserved = 0;
    uint64_t mismatches = 0;
    for (uint64_t i = 0; i < n; ++i) {
      state.apply(i);
      reserved += delta[i];
      mismatches += static_cast<uint64_t>(reserved) != state.reserved;
    }
    CHECK(mismatches == 0);
    // The picture: each column stacks its moment's reserved bytes.
    auto first_of = [n](int c) { return n * static_cast<uint64_t>(c) / 200; };
    SegmentRaster r = build_segment_raster(spans, n, first_of, 200, 120);
    REQUIRE(r.rgba.size() == 200u * 120u);
    uint64_t top = *std::max_element(r.column_reserved.begin(), r.column_reserved.end());
    CHECK(top + top / 20 == r.top_bytes);
    // A hover just above the bottom of a column with segments finds the oldest live one.
    for (int c = 0; c < 200; c += 37)
      if (r.column_reserved[static_cast<size_t>(c)] > 0)
        CHECK(span_at(spans, r, c, 0) == r.column_first_span[static_cast<size_t>(c)]);
  }
  // Unmapping pages from the middle of a mapped run ends it and goes on with what is left.
  Trace t;
  t.events.push_back({EventKind::SegmentMap, 0, 0, 8 << 20, 0x1000000, 1, 0});
  t.events.push_back({EventKind::SegmentUnmap, 0, 0, 2 << 20, 0x1200000, 2, 0});
  std::vector<SegmentSpan> spans = segment_spans(t);
  REQUIRE(spans.size() == 3);
  CHECK(spans[0].end == 1);
  CHECK(spans[1].size == (2u << 20));
  CHECK(spans[2].addr == 0x1400000);
  CHECK(spans[2].size == (4u << 20));
  CHECK(spans[1].vmm);
}

TEST_CASE("private pools: each pool's segments at the end are the snapshot's own", "[gui][pools]") {
  for (const char* file : {"graphs_two_pools.default.pickle.gz", "mempool_kept.default.pickle.gz",
                           "mempool_graph_capture.default.pickle.gz"}) {
    INFO(file);
    auto info = load_trace_info(kSnapshots + file);
    CursorSnapshot end = recorded_snapshot(*info, info->events() - 1);
    std::vector<PoolUsage> pools = pool_usage(*info, end, segment_spans(info->trace));
    REQUIRE(pools.size() == info->trace.meta.pools.size());
    REQUIRE(pools.size() >= 2);
    std::map<std::array<int64_t, 2>, uint64_t> want_reserved, want_allocated;
    for (const RecordedSegment& s : info->trace.meta.segments) {
      want_reserved[s.pool_id] += s.total_size;
      want_allocated[s.pool_id] += s.allocated_size;
    }
    uint64_t reserved = 0;
    for (const PoolUsage& u : pools) {
      INFO("pool " << u.name);
      const auto& id = info->trace.meta.pools[u.pool].id;
      if (!info->trace.meta.pools[u.pool].inferred()) {
        CHECK(u.reserved == want_reserved[id]);
        CHECK(u.allocated == want_allocated[id]);
      }
      CHECK(u.free_bytes == u.reserved - u.allocated);
      CHECK(u.peak_reserved >= u.reserved);
      reserved += u.reserved;
    }
    CHECK(reserved == end.frag.reserved);
    CHECK(pools[1].allocations > 0);
  }
}
