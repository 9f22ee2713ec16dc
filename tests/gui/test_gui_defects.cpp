// The desktop app's defects of issue 41, each against the model behind the view: steps found alike in
// two runs of one program, PyTorch's allocated bytes in the recorded lane, one free-space measure for
// the fragmentation panel and the OOM view, markers on the column that draws their event, the diff
// plot's scale, round axis ticks, colors, and keys queued between frames.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "gui/model/active_memory.h"
#include "gui/model/free_space.h"
#include "gui/model/key_queue.h"
#include "gui/model/oom_diagnosis.h"
#include "gui/model/palette.h"
#include "gui/model/recorded_run.h"
#include "gui/model/series.h"
#include "gui/model/trace_info.h"
#include "gui/model/trace_pair.h"
#include "report/diagnose.h"
#include "tests/snapshot_stats.h"

using namespace fraglab;
using namespace fraglab::gui;

namespace {

const std::string kSnapshots = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/";

// One program's loop, `steps` steps of allocations then frees; `device_calls`: a segment_map event after
// every k-th allocation of a step's first half (a setting that maps pages more often), `pause_us`: a pause
// before the first step (a run that waited longer to start).
Trace loop_trace(int steps, int device_every, int64_t pause_us) {
  Trace t;
  IdSlots slots;
  int64_t time = 0;
  auto push = [&](EventKind k, AllocId id, uint64_t size, int64_t dt) {
    Event e;
    e.kind = k;
    e.id = id;
    e.size = size;
    e.time_us = time += dt;
    t.events.push_back(e);
  };
  push(EventKind::Alloc, slots.acquire(), 64 << 20, 1);
  time += pause_us;
  for (int s = 0; s < steps; ++s) {
    std::vector<AllocId> ids;
    for (int i = 0; i < 60; ++i) {
      ids.push_back(slots.acquire());
      push(EventKind::Alloc, ids.back(), static_cast<uint64_t>(1 + i % 7) << 20, 10);
      if (device_every && i < 30 && i % device_every == 0)
        for (int k = 0; k < 6; ++k) push(EventKind::SegmentMap, 0, 2 << 20, 1);
    }
    for (AllocId id : ids) {
      push(EventKind::Free, id, 0, 10);
      slots.release(id);
    }
  }
  return t;
}

}  // namespace

TEST_CASE("defect 1: steps are found alike in two runs of one program, and time alignment squeezes neither",
          "[gui][pair][defects]") {
  auto a = make_trace_info(loop_trace(12, 0, 0), "a");
  auto b = make_trace_info(loop_trace(12, 3, 5'000'000), "b");  // many device calls, a 5 s pause first
  PairedSteps steps = paired_steps(*a, *b);
  INFO("steps by " << steps.how);
  REQUIRE(steps.a.size() == steps.b.size());
  CHECK(steps.a.size() >= 12);
  // Step k of A is step k of B: the same allocation (the k-th step's first) starts both.
  auto nth_alloc = [](const Trace& t, uint64_t index) {
    uint64_t n = 0;
    for (uint64_t i = 0; i < index; ++i) n += t.events[i].kind == EventKind::Alloc;
    return n;
  };
  for (size_t k = 1; k < steps.a.size(); ++k) CHECK(nth_alloc(a->trace, steps.a[k]) == nth_alloc(b->trace, steps.b[k]));
  // By time: the middle of A's step 5 lands in B's step 5, not squeezed into B's pause or first steps.
  Alignment by_time{Align::Time, a.get(), b.get(), &steps.a, &steps.b};
  uint64_t mid_a = (steps.a[5] + steps.a[6]) / 2;
  uint64_t mid_b = by_time.to_b(mid_a);
  CHECK(mid_b > steps.b[5]);
  CHECK(mid_b < steps.b[6]);
  CHECK(by_time.to_b(0) == 0);
  CHECK(by_time.to_b(a->events() - 1) == b->events() - 1);
  // Bundled recordings of one program under two settings find the same number of steps.
  for (auto [x, y] :
       {std::pair{"graph_mlp_train.default.pickle.gz", "graph_mlp_train.expandable.pickle.gz"},
        std::pair{"resnet50_train.default_empty2.pickle.gz", "resnet50_train.expandable_empty2.pickle.gz"},
        std::pair{"nccl_bucketed.default.pickle.gz", "nccl_bucketed.expandable.pickle.gz"}}) {
    INFO(x << " vs " << y);
    auto ta = load_trace_info(kSnapshots + x), tb = load_trace_info(kSnapshots + y);
    PairedSteps p = paired_steps(*ta, *tb);
    INFO("steps by " << p.how);
    CHECK(p.a.size() == p.b.size());
    CHECK(p.a.size() > 1);
  }
}

TEST_CASE("defect 2: the recorded lane's allocated bytes are PyTorch's allocated_bytes", "[gui][lanes][defects]") {
  auto stats = test::snapshot_stats(kSnapshots);
  int checked = 0;
  for (const char* file :
       {"graph_mlp_train.default.pickle.gz", "resnet50_train.default.pickle.gz",
        "gpt2_oom_backoff.default_cap0.12.stacks.pickle.gz", "kv_prealloc_serve.default_left6.pickle.gz",
        "bert_varlen_oom.default_cap0.16.pickle.gz", "varlen_transformer_train.default.pickle.gz",
        "graphs_two_pools.default.pickle.gz", "mempool_no_split.default_keptpools.pickle.gz",
        "unet_like.roundup_power2_divisions-4_left5.pickle.gz",
        "bert_varlen_oom.max_split_size_mb-128_left12.8.pickle.gz", "gpt2_oom_backoff.expandable_cap0.12.pickle.gz"}) {
    INFO(file);
    REQUIRE(stats.count(file) == 1);
    const auto& s = stats[file]["stats"];
    auto info = load_trace_info(kSnapshots + file);
    auto run = recorded_result(*info, {});
    REQUIRE(run);
    CHECK(run->replay.allocated.bytes == s["allocated_bytes.all.peak"].get<uint64_t>());
    CHECK(run->replay.final_allocated == s["allocated_bytes.all.current"].get<uint64_t>());
    ++checked;
  }
  CHECK(checked == 11);
  // Blocks the program frees while another stream still uses them (record_stream, a prefetching side stream):
  // out of allocated_bytes at free_requested, as PyTorch's free() takes them out, though held until
  // free_completed; the cursor's panel shows them apart, neither allocated nor free.
  {
    const std::string corpus = std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/";
    const std::string file = "side_stream_prefetch.default.pickle.gz";
    auto corpus_stats = test::snapshot_stats(corpus);
    REQUIRE(corpus_stats.count(file) == 1);
    const auto& s = corpus_stats[file]["stats"];
    auto info = load_trace_info(corpus + file);
    auto run = recorded_result(*info, {});
    REQUIRE(run);
    CHECK(run->replay.allocated.bytes == s["allocated_bytes.all.peak"].get<uint64_t>());
    CHECK(run->replay.final_allocated == s["allocated_bytes.all.current"].get<uint64_t>());
    CursorSnapshot snap = recorded_snapshot(*info, run->replay.allocated.event_index);
    CHECK(snap.frag.allocated == run->replay.allocated.bytes);
    uint64_t most_awaiting = 0;
    for (uint64_t at = 0; at < info->events(); at += 97) {
      CursorSnapshot here = recorded_snapshot(*info, at);
      CHECK(here.frag.reserved == here.frag.allocated + here.awaiting_streams + here.frag.free_bytes);
      most_awaiting = std::max(most_awaiting, here.awaiting_streams);
    }
    CHECK(most_awaiting > 0);  // the side stream's blocks do wait
  }
  // The rule itself: a large-pool remainder of at most 1 MiB stays in the block; small pools, expandable
  // segments and requests at max_split_size split by other rules.
  detail::PytorchAllocatorConfig config;
  constexpr uint64_t MiB = 1 << 20;
  CHECK(recorded_block_size(11 * MiB, config, 12 * MiB) == 12 * MiB);              // 1 MiB left: kept whole
  CHECK(recorded_block_size(10 * MiB, config, 12 * MiB) == 10 * MiB);              // 2 MiB left: split
  CHECK(recorded_block_size(11 * MiB, config, 12 * MiB, true) == 11 * MiB);        // expandable: split
  CHECK(recorded_block_size(1000, config, 2 * MiB) == 1024);                       // small pool
  CHECK(recorded_block_size(5 * MiB, config, 20 * MiB, false, true) == 20 * MiB);  // no_split pool
  config.max_split_size = 8 * MiB;
  CHECK(recorded_block_size(9 * MiB, config, 20 * MiB) == 20 * MiB);  // oversize: never split
}

TEST_CASE("defect 2: the fragmentation panel and the OOM view measure free space alike", "[gui][lanes][defects]") {
  // A KV-cache server that ran out of memory 38 times under a memory fraction.
  auto info = load_trace_info(kSnapshots + "kv_prealloc_serve.default_left6.pickle.gz");
  DiagnoseOptions o;
  o.search = false;
  DiagnoseReport r = diagnose(info->trace, info->path, info->inferred_capacity, o);
  REQUIRE(r.ooms.size() >= 4);
  for (size_t i = 0; i < r.ooms.size(); i += r.ooms.size() / 4) {
    const Diagnosis& d = r.ooms[i];
    INFO("OOM at event " << d.event_index);
    Fragmentation oom_view = free_space(d.state).frag;
    // The lane at the moment the diagnosis reads: as the request arrived, before the allocator returned
    // its cached segments trying to serve it (the cursor on the OOM's tick shows after them).
    uint64_t freed = 0;
    uint64_t arrival = request_arrival_event(info->trace, shown_event(d), &freed);
    CHECK(arrival < shown_event(d));
    Fragmentation panel = free_space(recorded_snapshot(*info, arrival)).frag;
    Fragmentation after = free_space(recorded_snapshot(*info, shown_event(d))).frag;
    CHECK(after.reserved + freed == panel.reserved);
    CHECK(oom_view.reserved == panel.reserved);
    CHECK(oom_view.allocated == panel.allocated);
    CHECK(oom_view.free_bytes == panel.free_bytes);
    CHECK(oom_view.allocated - oom_view.requested == panel.allocated - panel.requested);
    CHECK(oom_view.free_ranges == panel.free_ranges);
    CHECK(oom_view.largest_free == panel.largest_free);
    // The diagnosis's own sums are the same measure.
    CHECK(oom_view.free_bytes == d.state.free_bytes);
    CHECK(oom_view.largest_free == d.state.largest_free);
  }
  // Free ranges stop at segment ends, even where two segments touch.
  std::vector<Interval> segments{{0, 100}, {100, 100}}, physical{{0, 200}}, blocks{{50, 10}};
  FreeSpace f = measure_free_space(segments, physical, blocks, 10, 8, 0);
  CHECK(f.sizes == std::vector<uint64_t>{50, 40, 100});
  CHECK(f.frag.free_ranges == 3);
  CHECK(f.frag.free_bytes == 190);
  CHECK(f.frag.largest_free == 100);
}

TEST_CASE("defect 3 and 5: peaks, OOM ticks and the cursor are drawn on the column that draws their event",
          "[gui][defects]") {
  for (double span : {100000.0, 1000.0, 37.0}) {  // many events a column, about one, several columns an event
    const int width = 640;
    auto first_of = [&](int c) { return static_cast<uint64_t>(span * c / width); };
    for (uint64_t e = 0; e < static_cast<uint64_t>(span); e += 1 + static_cast<uint64_t>(span) / 97) {
      double x = event_column_center(first_of, width, e);
      int c = static_cast<int>(x);  // the column the marker's center lies in
      INFO("span " << span << " event " << e << " x " << x);
      CHECK(x - c == Approx(0.5).margin(0.51));
      // That column draws the event: its events [first_of(c), first_of(c + 1)) hold it.
      CHECK(first_of(c) <= e);
      CHECK(e < std::max(first_of(c + 1), first_of(c) + 1));
    }
  }
  // The OOM view names a peak by the event that set it (the toolbar's), an OOM by its own.
  Diagnosis peak;
  peak.source = Diagnosis::Source::Peak;
  peak.event_index = 101;  // diagnose looks just before event 101: just after the peak's event 100
  CHECK(shown_event(peak) == 100);
  Diagnosis oom;
  oom.source = Diagnosis::Source::Recorded;
  oom.event_index = 57;
  CHECK(shown_event(oom) == 57);
}

TEST_CASE("defect 3: the active memory picture puts the cursor on the column holding the event", "[gui][defects]") {
  MemoryRaster r;
  r.column_first = {0, 0, 0, 5, 9, 20};  // zoomed in at the start, out later
  CHECK(r.column_of(0) == Approx(1.5));  // columns 0..2 start at event 0
  CHECK(r.column_of(7) == Approx(3.5));  // inside column 3's events [5, 9)
  CHECK(r.column_of(9) == Approx(4.5));
  CHECK(r.column_of(25) == Approx(5.5));
}

TEST_CASE("defect 4: the diff plot's scale ignores the lanes' exits after the program's last allocation",
          "[gui][defects]") {
  // -4 GiB through the program, then +18 GiB where one lane empties its cache at exit.
  std::vector<int32_t> kib(1000, 0);
  for (size_t i = 100; i < 900; ++i) kib[i] = -4 * 1024 * 1024;
  for (size_t i = 950; i < 1000; ++i) kib[i] = 18 * 1024 * 1024;
  MinMaxPyramid p(kib);
  CHECK(diff_extent(p, 0, 1000, 940) == 4 * 1024 * 1024);
  CHECK(diff_extent(p, 960, 1000, 940) == 18 * 1024 * 1024);  // zoomed into the exit alone: its own scale
  CHECK(diff_extent(p, 0, 1000, 1000) == 18 * 1024 * 1024);
  // The trace knows where its program ends.
  Trace t = loop_trace(2, 0, 0);
  t.events.push_back({EventKind::SegmentFree, 0, 0, 2 << 20, 0, 0, 0});
  t.events.push_back({EventKind::EmptyCache, 0, 0, 0, 0, 0, 0});
  auto info = make_trace_info(t, "t");
  CHECK(info->program_end == info->events() - 2);
}

TEST_CASE("defect 5: axis ticks step 1, 2, 5 of one binary unit", "[gui][defects]") {
  ByteTicks t = byte_ticks(uint64_t{1100} << 20, 4);  // 1.07 GiB
  CHECK(t.step == uint64_t{500} << 20);
  CHECK(t.values == std::vector<uint64_t>{0, uint64_t{500} << 20, uint64_t{1000} << 20});
  CHECK(t.label(t.values[1]) == "500 MiB");
  CHECK(t.label(t.values[2]) == "1000 MiB");
  ByteTicks g = byte_ticks(uint64_t{80} << 30, 4);
  CHECK(g.step == uint64_t{20} << 30);
  CHECK(g.label(g.values.back()) == "80 GiB");
  for (uint64_t top : {uint64_t{1}, uint64_t{700}, uint64_t{3} << 20, uint64_t{522} << 20, uint64_t{5} << 40}) {
    ByteTicks x = byte_ticks(top, 5);
    INFO(top);
    CHECK(x.values.size() >= 1);
    CHECK(x.values.size() <= 6);
    CHECK(x.values.back() <= top);
    CHECK(x.values.back() + x.step > top);
    uint64_t m = x.step / x.unit;  // 1, 2 or 5 times a power of ten
    while (m % 10 == 0) m /= 10;
    CHECK((m == 1 || m == 2 || m == 5));
  }
}

TEST_CASE("defect 5: colors: no grey age, a default pool color, site colors only for sites holding memory",
          "[gui][defects]") {
  auto saturation = [](uint32_t c) {
    int hi = std::max({channel(c, 0), channel(c, 1), channel(c, 2)});
    int lo = std::min({channel(c, 0), channel(c, 1), channel(c, 2)});
    return hi - lo;
  };
  for (int i = 0; i <= 100; ++i) CHECK(saturation(age_color(i / 100.0)) >= 60);
  CHECK(saturation(pool_color(0)) >= 60);
  CHECK(pool_color(0) != kNoSiteColor);
  CHECK(pool_color(1) != pool_color(0));
  // Stacks that only free (no allocation) make sites of 0 bytes: no color for them.
  Trace t;
  t.meta.stacks.push_back({{"forward", "model.py", 10}});
  t.meta.stacks.push_back({{"cleanup", "model.py", 99}});
  IdSlots slots;
  AllocId id = slots.acquire();
  t.events.push_back({EventKind::Alloc, 0, id, 4096, 0, 1, 1});
  t.events.push_back({EventKind::Free, 0, id, 0, 0, 2, 2});
  auto info = make_trace_info(t, "t");
  int colored = 0;
  for (uint32_t s = 0; s < info->sites.size(); ++s) {
    INFO(info->sites[s].label);
    if (info->color_slot(s) >= 0) {
      ++colored;
      CHECK(info->sites[s].bytes > 0);
    }
  }
  CHECK(colored == 1);
}

TEST_CASE("defect 5: every key pressed between two frames runs, and none after a Ctrl+L", "[gui][defects]") {
  KeyQueue q;
  for (int i = 0; i < 10; ++i) q.press({262, false, false});  // ten Right presses before one frame
  QueuedInput in = q.take(false);
  CHECK(in.shortcuts.size() == 10);
  CHECK(q.empty());
  // A quick Ctrl+L, then a path typed before the field had the keyboard: no shortcut runs.
  q.press({'P', false, false});
  q.character(U'p');
  q.press({'L', true, false});
  for (char32_t c : std::u32string(U"/tmp/x")) {
    q.press({static_cast<int>(c >= U'a' ? c - 32 : c), false, false});
    q.character(c);
  }
  in = q.take(false);
  REQUIRE(in.shortcuts.size() == 1);
  CHECK(in.shortcuts[0].key == 'P');
  CHECK(in.focus_path);
  CHECK(in.typed == U"/tmp/x");
  // While a text field has the keyboard nothing is a shortcut.
  q.press({'Z', false, false});
  in = q.take(true);
  CHECK(in.shortcuts.empty());
  CHECK(q.empty());
}
