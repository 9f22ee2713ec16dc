// The GUI's views of the recording itself: the recorded lane (PyTorch's own blocks at their
// recorded addresses) and the active memory model (every allocation a band over time).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "gui/model/active_memory.h"
#include "gui/model/event_search.h"
#include "gui/model/palette.h"
#include "gui/model/recorded_run.h"
#include "gui/model/trace_info.h"
#include "gui/model/trace_pair.h"
#include "sim/replay_simulated.h"
#include "tests/gui_test_traces.h"
#include "traces/trace_io.h"

using namespace fraglab;
using namespace fraglab::gui;

namespace {

const std::string kCases = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots";

Event ev(EventKind kind, AllocId id, uint64_t size, Addr addr, PoolIndex pool = 0) {
  Event e;
  e.kind = kind;
  e.id = id;
  e.size = size;
  e.addr = addr;
  e.pool = pool;
  return e;
}

}  // namespace

TEST_CASE("the recorded lane follows the recording's segment calls and block addresses", "[gui][recorded]") {
  Trace t;
  t.meta.pools.push_back(PoolInfo{{1, 0}});
  const Addr seg = 0x7f0000000000, vmm = 0x7f1000000000;
  t.events = {
      ev(EventKind::SegmentAlloc, 0, 2 << 20, seg),
      ev(EventKind::Alloc, 0, 1000, seg),            // rounds to 1024
      ev(EventKind::Alloc, 1, 4096, seg + 1024, 1),  // a private pool's block
      ev(EventKind::SegmentMap, 0, 2 << 20, vmm),
      ev(EventKind::SegmentMap, 0, 2 << 20, vmm + (2 << 20)),  // extends the mapped run
      ev(EventKind::Alloc, 2, 3 << 20, vmm),
      ev(EventKind::Free, 0, 0, 0),
      ev(EventKind::Free, 2, 0, 0),
      ev(EventKind::SegmentUnmap, 0, 2 << 20, vmm),  // splits nothing: the first half goes
      ev(EventKind::Oom, 0, 64 << 20, 0),
  };
  auto info = make_trace_info(t, "hand-made");
  REQUIRE(info->recorded_layout);

  CursorSnapshot at5 = recorded_snapshot(*info, 5);
  REQUIRE(at5.regions.size() == 2);
  CHECK(at5.regions[0].addr == seg);
  CHECK_FALSE(at5.regions[0].is_vmm);
  CHECK(at5.regions[1].addr == vmm);
  CHECK(at5.regions[1].size == 4u << 20);  // two adjacent mappings: one region
  CHECK(at5.regions[1].is_vmm);
  CHECK(at5.region_pools == std::vector<PoolIndex>{1, 0});
  REQUIRE(at5.blocks.size() == 3);
  CHECK(at5.blocks[0].size == 1024);
  CHECK(at5.blocks[0].requested == 1000);
  CHECK(at5.blocks[1].addr == seg + 1024);
  CHECK(at5.frag.reserved == 6u << 20);
  CHECK(at5.frag.allocated == 1024 + 4096 + (3u << 20));

  CursorSnapshot end = recorded_snapshot(*info, 9);
  REQUIRE(end.regions.size() == 2);
  CHECK(end.regions[1].addr == vmm + (2 << 20));
  CHECK(end.regions[1].size == 2u << 20);
  CHECK(end.blocks.size() == 1);
  CHECK(end.frag.reserved == 4u << 20);

  auto result = recorded_result(*info, {});
  REQUIRE(result);
  CHECK(result->replay.reserved.bytes == 6u << 20);
  // The map that set the peak (event 4) was made for the allocation after it: the peak is that request's.
  CHECK(result->replay.reserved.event_index == 5);
  CHECK(result->series[static_cast<int>(Series::Allocated)].bytes_at(5) == 1024 + 4096 + (3u << 20));
  CHECK(result->series[static_cast<int>(Series::Requested)].bytes_at(6) ==
        ByteSeries::to_bytes(ByteSeries::to_kib(4096 + (3u << 20))));
  REQUIRE(result->replay.ooms.size() == 1);
  CHECK(result->replay.ooms[0].event_index == 9);
  CHECK(result->device_grows == std::vector<uint64_t>{0, 3, 4});

  Trace plain = test::make_fragmenting_trace(50);
  CHECK_FALSE(has_recorded_layout(plain));
  CHECK_THROWS(recorded_snapshot(*make_trace_info(plain, "plain"), 10));
}

TEST_CASE("at its last event the recorded lane shows the snapshot's own segments and blocks", "[gui][recorded]") {
  // Snapshots with private pools, a ring buffer that began mid-run (initial state) and one from process start.
  for (const char* name : {"graphs_two_pools.default.pickle.gz", "bert_varlen_train.default_ring60000.pickle.gz",
                           "mempool_kept.default.pickle.gz", "gpt2_train.expandable_late2.pickle.gz",
                           "bert_varlen_train.expandable_ring60000.pickle.gz"}) {
    INFO(name);
    auto info = load_trace_info(kCases + "/" + name);
    REQUIRE(info->recorded_layout);
    const auto& segments = info->trace.meta.segments;
    CursorSnapshot end = recorded_snapshot(*info, info->events() - 1);
    REQUIRE(end.regions.size() == segments.size());
    std::map<Addr, const RecordedSegment*> by_addr;
    for (const auto& s : segments) by_addr[s.address] = &s;
    size_t i = 0, private_regions = 0, private_segments = 0;
    for (const auto& [addr, s] : by_addr) {
      CHECK(end.regions[i].addr == addr);
      CHECK(end.regions[i].size == s->total_size);
      bool is_private = s->pool_id != std::array<int64_t, 2>{0, 0};
      private_segments += is_private;
      private_regions += end.region_pools[i] != 0;
      ++i;
    }
    CHECK(private_regions == private_segments);  // every private segment here holds blocks
    std::vector<Addr> live;
    for (const auto& s : segments)
      for (const auto& b : s.blocks)
        if (b.state != RecordedBlock::State::Inactive) live.push_back(b.address);
    std::sort(live.begin(), live.end());
    std::vector<Addr> shown;
    for (const auto& b : end.blocks) shown.push_back(b.addr);
    CHECK(shown == live);
  }
}

TEST_CASE("the recorded lane's peak is the request the peak's segment call served, as the pytorch lane's is",
          "[gui][recorded]") {
  const std::string corpus = std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/";
  for (const char* name : {"gpt2_train.default.pickle.gz", "bert_varlen_train.expandable.pickle.gz"}) {
    INFO(name);
    auto info = load_trace_info(corpus + name);
    const std::vector<Event>& events = info->trace.events;
    auto recorded = recorded_result(*info, {});
    REQUIRE(recorded);
    const Peak peak = recorded->replay.reserved;
    REQUIRE(peak.event_index > 0);
    CHECK(events[peak.event_index].kind == EventKind::Alloc);
    const EventKind before = events[peak.event_index - 1].kind;
    CHECK((before == EventKind::SegmentAlloc || before == EventKind::SegmentMap));
    // The model replays these exactly (fidelity): its engine puts the same peak at the same request.
    ReplayOptions plain;
    plain.oracle_bound = false;
    MemorySource source(info->trace);
    ReplayResult model = replay_simulated(source, PolicySpec::parse("pytorch"), {}, plain, &events);
    CHECK(model.reserved.bytes == peak.bytes);
    CHECK(model.reserved.event_index == peak.event_index);
  }
}

TEST_CASE("active memory stacks live allocations in allocation order at any event", "[gui][memory]") {
  // Over 2 checkpoint strides, so live sets come from checkpoints plus a sweep.
  auto info = make_trace_info(test::make_fragmenting_trace(70000, 11), "synthetic");
  ActiveMemory model(info);
  REQUIRE(model.checkpoints() >= 2);
  const auto& events = info->trace.events;
  // Brute force: every alloc live at event i.
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    uint64_t at = rng() % info->events();
    std::vector<uint64_t> want;
    std::map<AllocId, uint64_t> open;
    for (uint64_t i = 0; i <= at; ++i) {
      if (events[i].kind == EventKind::Alloc) open[events[i].id] = i;
      if (events[i].kind == EventKind::Free) open.erase(events[i].id);
    }
    uint64_t bytes = 0;
    for (auto& [id, a] : open) {
      want.push_back(a);
      bytes += events[a].size;
    }
    std::sort(want.begin(), want.end());
    CHECK(model.live_at(at) == want);
    CHECK(model.total().bytes_at(at) == ByteSeries::to_bytes(ByteSeries::to_kib(bytes)));
    // The band at a byte offset is the allocation whose stacked range holds it.
    // ~50 bands spread over the stack (each band_at sweeps from a checkpoint: all of them would take
    // minutes under the sanitizers).
    const size_t stride = std::max<size_t>(7, want.size() / 50);
    uint64_t offset = 0;  // bytes of want[0, j)
    for (size_t k = 0, j = 0; k < want.size(); k += stride) {
      for (; j < k; ++j) offset += events[want[j]].size;
      CHECK(model.band_at(at, offset + events[want[k]].size / 2) == want[k]);
    }
    CHECK_FALSE(model.band_at(at, bytes + 1).has_value());
  }
}

TEST_CASE("the active memory raster fills each column to its total, tiny bands included", "[gui][memory]") {
  auto info = make_trace_info(test::make_fragmenting_trace(5000, 3), "synthetic");
  ActiveMemory model(info);
  RasterRequest req;
  req.begin = 0;
  req.end = static_cast<double>(info->events());
  req.width = 200;
  req.height = 120;
  MemoryRaster r = build_raster(model, req);
  REQUIRE(r.rgba.size() == 200u * 120u);
  REQUIRE(r.column_event.size() == 200u);
  const uint32_t background = r.rgba[0];  // the top-left pixel: above every stack (5% headroom)
  for (int c = 0; c < 200; c += 13) {
    uint64_t e = r.column_event[static_cast<size_t>(c)];
    // The column shows the event of its highest total.
    uint64_t first = static_cast<uint64_t>(req.end * c / 200), last = static_cast<uint64_t>(req.end * (c + 1) / 200);
    for (uint64_t i = first; i < last; ++i) CHECK(model.total().bytes_at(i) <= model.total().bytes_at(e));
    int filled = 0;
    for (int row = 0; row < 120; ++row)
      if (r.rgba[static_cast<size_t>(row) * 200 + static_cast<size_t>(c)] != background) ++filled;
    double want = static_cast<double>(model.total().bytes_at(e)) / static_cast<double>(r.top_bytes) * 120;
    CHECK(std::abs(filled - want) <= 1.5);
  }
}

TEST_CASE("event search finds by address, size range, action and frame text", "[gui][search]") {
  Trace t;
  t.meta.stacks.push_back({{"forward", "model.py", 10}, {"Linear", "torch/nn/linear.py", 3}});
  t.meta.stacks.push_back({{"step", "train.py", 42}});
  const Addr seg = 0x7f0000000000;
  t.events = {
      ev(EventKind::SegmentAlloc, 0, 2 << 20, seg), ev(EventKind::Alloc, 0, 1000, seg),
      ev(EventKind::Alloc, 1, 4 << 10, seg + 1024), ev(EventKind::Free, 0, 1000, seg),
      ev(EventKind::Alloc, 0, 1 << 20, seg + 8192),
  };
  t.events[1].stack = 1;
  t.events[2].stack = 2;
  t.events[4].stack = 1;
  auto info = make_trace_info(t, "hand-made");
  auto find = [&](const std::string& q) { return find_events(*info, parse_event_query(q)); };
  using V = std::vector<uint64_t>;
  CHECK(find("0x7f0000000400") == V{0, 2});  // inside the segment and the second block
  CHECK(find("0x7f0000000010 action:alloc") == V{1});
  CHECK(find("size:1KiB..8KiB") == V{2});
  CHECK(find("size:..1000") == V{1, 3});
  CHECK(find("size:1MiB") == V{4});
  CHECK(find("action:free") == V{3});
  CHECK(find("FORWARD") == V{1, 4});            // frame text, any case
  CHECK(find("linear.py forward") == V{1, 4});  // every word, in any frame
  CHECK(find("train") == V{2});
  CHECK(find("forward train").empty());
  CHECK_THROWS_WITH(parse_event_query("size:lots"), Catch::Contains("bad size 'lots'"));
  CHECK_THROWS_WITH(parse_event_query("action:explode"), Catch::Contains("unknown action"));
  CHECK_THROWS_WITH(parse_event_query("0xzz"), Catch::Contains("bad address"));
}

namespace {

// `steps` training steps: each allocates `per_step` tensors (activations), then frees them
// all; a weight tensor stays live throughout.
Trace looping_trace(int steps, int per_step, int64_t us_per_event) {
  Trace t;
  IdSlots slots;
  int64_t time = 0;
  auto push = [&](EventKind k, AllocId id, uint64_t size) {
    Event e;
    e.kind = k;
    e.id = id;
    e.size = size;
    e.time_us = time += us_per_event;
    t.events.push_back(e);
  };
  push(EventKind::Alloc, slots.acquire(), 64 << 20);
  for (int s = 0; s < steps; ++s) {
    std::vector<AllocId> ids;
    for (int i = 0; i < per_step; ++i) {
      ids.push_back(slots.acquire());
      push(EventKind::Alloc, ids.back(), (1 + i % 5) << 20);
    }
    for (AllocId id : ids) {
      push(EventKind::Free, id, 0);
      slots.release(id);
    }
  }
  return t;
}

}  // namespace

TEST_CASE("steps are found from the loop's period and align two runs step by step", "[gui][pair]") {
  auto a = make_trace_info(looping_trace(12, 50, 10), "a");
  auto b = make_trace_info(looping_trace(12, 80, 3), "b");  // longer steps, a faster clock
  auto sa = detect_steps(live_kib(a->trace)), sb = detect_steps(live_kib(b->trace));
  // Boundaries where live bytes are lowest: after each step's frees (100 and 160 events a step).
  REQUIRE(sa.size() >= 11);
  REQUIRE(sb.size() >= 11);
  CHECK(sa[0] == 0);
  for (size_t k = 2; k < sa.size(); ++k) CHECK(sa[k] - sa[k - 1] == 100);
  for (size_t k = 2; k < sb.size(); ++k) CHECK(sb[k] - sb[k - 1] == 160);
  Alignment by_step{Align::Step, a.get(), b.get(), &sa, &sb};
  for (size_t k = 0; k < std::min(sa.size(), sb.size()); ++k) CHECK(by_step.to_b(sa[k]) == sb[k]);
  CHECK(by_step.to_b(sa[3] + 50) == sb[3] + 80);  // half way through a step: half way through B's
  Alignment by_time{Align::Time, a.get(), b.get(), &sa, &sb};
  // By time, each step's time maps onto the other's step (B's faster clock is stretched, not squeezed).
  for (size_t k = 0; k < std::min(sa.size(), sb.size()); ++k) CHECK(by_time.to_b(sa[k]) == sb[k]);
  // Without steps, each trace's duration onto the other's: A's middle in time is B's.
  Alignment by_duration{Align::Time, a.get(), b.get(), nullptr, nullptr};
  CHECK(std::llabs(static_cast<long long>(by_duration.to_b(a->events() / 2)) -
                   static_cast<long long>(b->events() / 2)) <= 2);
  Alignment by_events{Align::Events, a.get(), b.get(), &sa, &sb};
  CHECK(by_events.to_b(0) == 0);
  CHECK(std::llabs(static_cast<long long>(by_events.to_b(a->events() / 2)) - static_cast<long long>(b->events() / 2)) <=
        1);
  // No loop, no steps.
  CHECK(detect_steps(std::vector<uint32_t>(5000, 7)) == std::vector<uint64_t>{0});
}

TEST_CASE("the GUI's diff of two loaded traces is fraglab diff's", "[gui][pair]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "fraglab_gui_pair_test";
  fs::create_directories(dir);
  Trace ta = looping_trace(6, 40, 10), tb = test::make_fragmenting_trace(400);
  save_trace(ta, (dir / "a.fltrace").string());
  save_trace(tb, (dir / "b.fltrace").string());
  auto a = load_trace_info((dir / "a.fltrace").string());
  auto b = load_trace_info((dir / "b.fltrace").string());
  TracePairRun run(a, b, "bestfit");
  while (!run.settled()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  REQUIRE(run.error().empty());
  auto r = run.result();
  REQUIRE(r);
  REQUIRE(r->diff);
  DiffOptions o;
  o.policy = "bestfit";
  TraceDiff want = diff_traces((dir / "a.fltrace").string(), (dir / "b.fltrace").string(), o);
  CHECK(r->diff->a.peak_reserved == want.a.peak_reserved);
  CHECK(r->diff->b.peak_reserved == want.b.peak_reserved);
  CHECK(r->diff->a.events == ta.events.size());
  REQUIRE(r->diff->by_size_class.size() == want.by_size_class.size());
  for (size_t i = 0; i < want.by_size_class.size(); ++i) {
    CHECK(r->diff->by_size_class[i].key == want.by_size_class[i].key);
    CHECK(r->diff->by_size_class[i].delta_bytes() == want.by_size_class[i].delta_bytes());
  }
  fs::remove_all(dir);
}
