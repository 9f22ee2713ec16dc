// The GUI's data layer: min/max pyramids, per-event series, block-map layout and level of
// detail, cursor snapshots and the "largest request that fits" probe, recent files.
#include <catch2/catch.hpp>

#include <array>

#include <filesystem>
#include <random>
#include <thread>

#include "allocators/registry.h"
#include "device/limiting_device.h"
#include "gui/model/block_strip.h"
#include "gui/model/palette.h"
#include "gui/model/policy_run.h"
#include "gui/model/recent_files.h"
#include "gui/model/series.h"
#include "gui/model/trace_info.h"
#include "report/program_attribution.h"
#include "tests/gui_test_traces.h"

using namespace fraglab;
using namespace fraglab::gui;

TEST_CASE("min/max pyramid agrees with a scan over any range", "[gui]") {
  std::mt19937 rng(1);
  std::vector<uint32_t> u(5000);
  std::vector<int32_t> s(5000);
  for (size_t i = 0; i < u.size(); ++i) {
    u[i] = rng() % 100000;
    s[i] = static_cast<int32_t>(rng() % 200000) - 100000;
  }
  MinMaxPyramid pu(u), ps(s);
  for (int trial = 0; trial < 2000; ++trial) {
    uint64_t a = rng() % u.size(), b = a + 1 + rng() % (u.size() - a);
    auto [ulo, uhi] = std::minmax_element(u.begin() + static_cast<ptrdiff_t>(a), u.begin() + static_cast<ptrdiff_t>(b));
    auto [slo, shi] = std::minmax_element(s.begin() + static_cast<ptrdiff_t>(a), s.begin() + static_cast<ptrdiff_t>(b));
    REQUIRE(pu.range(a, b) == std::make_pair<int64_t, int64_t>(*ulo, *uhi));
    REQUIRE(ps.range(a, b) == std::make_pair<int64_t, int64_t>(*slo, *shi));
  }
  CHECK(pu.range(10, 10) == std::make_pair<int64_t, int64_t>(0, 0));
  CHECK(pu.range(4990, 99999).second == *std::max_element(u.begin() + 4990, u.end()));
}

TEST_CASE("byte series repeat values over skipped events and round up to KiB", "[gui]") {
  ByteSeries s;
  s.set(0, 1000);
  s.set(3, 5 << 20);
  s.finish(6);
  REQUIRE(s.size() == 6);
  CHECK(s.bytes_at(0) == 1024);
  CHECK(s.bytes_at(2) == 1024);
  CHECK(s.bytes_at(3) == (5u << 20));
  CHECK(s.bytes_at(5) == (5u << 20));
}

namespace {

CursorSnapshot one_segment_snapshot(std::vector<SnapshotBlock> blocks) {
  CursorSnapshot snap;
  snap.regions.push_back({1ull << 32, 1 << 20, false});
  snap.physical.push_back({1ull << 32, 1 << 20});
  snap.blocks = std::move(blocks);
  return snap;
}

}  // namespace

TEST_CASE("block strip draws blocks to scale and merges sub-pixel blocks", "[gui]") {
  const Addr base = 1ull << 32;
  SECTION("a block covering whole pixels is one rectangle of its color") {
    auto snap = one_segment_snapshot({{base + (256 << 10), 512 << 10, 512 << 10, 0, 0}});
    BlockStrip strip = build_block_strip(snap, 100, 1, [](const SnapshotBlock& b) { return size_class_color(b.size); });
    REQUIRE(strip.blocks.size() == 1);
    CHECK(strip.blocks[0].color == size_class_color(512 << 10));
    CHECK(strip.blocks[0].x0 == Approx(25.0).margin(0.01));
    CHECK(strip.blocks[0].x1 == Approx(75.0).margin(0.01));
    StripHit hit = hit_test(strip, snap, 0, 50);
    REQUIRE(hit.block);
    CHECK(hit.block->addr == base + (256 << 10));
    hit = hit_test(strip, snap, 0, 10);
    CHECK(hit.region == 0);
    CHECK(hit.physical);
    CHECK(hit.block == nullptr);
  }
  SECTION("ten thousand tiny blocks cost at most a rectangle a pixel") {
    std::vector<SnapshotBlock> blocks;
    for (uint64_t i = 0; i < 10000; ++i) blocks.push_back({base + i * 100, 50, 50, i, 0});  // half the bytes free
    auto snap = one_segment_snapshot(blocks);
    BlockStrip strip = build_block_strip(snap, 100, 4, [](const SnapshotBlock&) { return rgba(255, 255, 255); });
    CHECK(strip.blocks.size() <= 400);
    // Half covered: each pixel mixes white with the free color at about 50%.
    bool mixed = std::any_of(strip.blocks.begin(), strip.blocks.end(), [](const StripRect& r) {
      return channel(r.color, 0) > channel(kFreeColor, 0) + 60 && channel(r.color, 0) < 200;
    });
    CHECK(mixed);
  }
  SECTION("rows wrap and regions are separated") {
    CursorSnapshot snap;
    snap.regions = {{base, 1 << 20, false}, {base + (4 << 20), 2 << 20, true}};
    snap.physical = {{base, 1 << 20}, {base + (4 << 20), 1 << 20}};
    BlockStrip strip = build_block_strip(snap, 50, 4, [](const SnapshotBlock&) { return 0u; });
    REQUIRE(strip.region_start.size() == 2);
    CHECK(strip.region_start[1] > strip.region_start[0] + (1 << 20) / strip.bytes_per_px);
    int max_row = 0;
    for (const auto& r : strip.background) max_row = std::max(max_row, r.row);
    CHECK(max_row == 3);
    bool unmapped = std::any_of(strip.background.begin(), strip.background.end(),
                                [](const StripRect& r) { return r.color == kUnmappedColor; });
    CHECK(unmapped);  // the second half of the VMM range has no pages
  }
}

TEST_CASE("allocation sites skip PyTorch's own frames", "[gui]") {
  std::vector<StackFrame> frames{{"empty", "/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/functional.py", 1},
                                 {"forward", "/opt/torch/.venv/lib/python3.12/site-packages/transformers/gpt2.py", 569},
                                 {"main", "train.py", 3}};
  CHECK(site_label(frames) == "forward  gpt2.py:569");
  CHECK(site_label({}) == "(no stack recorded)");
  auto info = make_trace_info(test::make_fragmenting_trace(300), "synthetic");
  REQUIRE(info->sites.size() == 3);
  CHECK(info->has_stacks);
  uint64_t bytes = 0;
  for (const auto& s : info->sites) bytes += s.bytes;
  CHECK(bytes == info->stats.total_requested);
  CHECK(info->sites[0].bytes >= info->sites[1].bytes);
  // Colors go to recorded sites in order of bytes; the no-stack site has none.
  CHECK_FALSE(info->sites[info->no_stack_site].recorded);
  CHECK(info->color_slot(info->no_stack_site) == -1);
  CHECK(info->color_slot(0) == 0);
  CHECK(info->color_slot(1) == 1);
  // Every freed allocation knows its free event.
  for (uint64_t i = 0; i < info->events(); ++i) {
    uint64_t f = info->free_index[i];
    if (f == TraceInfo::kNever) continue;
    REQUIRE(info->trace.events[f].kind == EventKind::Free);
    REQUIRE(info->trace.events[f].id == info->trace.events[i].id);
  }
}

TEST_CASE("every allocation has the category the program attribution gives it (--color category)", "[gui]") {
  auto info = load_trace_info(std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/gpt2_train.default.stacks.pickle.gz");
  ProgramAttribution program(info->trace);
  REQUIRE(info->categories.size() == info->events());
  std::array<uint64_t, kMemoryCategories> bytes{};
  for (uint64_t i = 0; i < info->events(); ++i) {
    const Event& e = info->trace.events[i];
    if (e.kind != EventKind::Alloc) {
      CHECK(info->categories[i] == TraceInfo::kNoCategory);
      continue;
    }
    REQUIRE(info->categories[i] == static_cast<uint8_t>(program.category_of(i)));
    bytes[info->categories[i]] += e.size;
  }
  // GPT-2 small: 474.7 MiB of parameters made by model.to(), AdamW's two states of each, activations each step.
  CHECK(bytes[static_cast<size_t>(MemoryCategory::Parameter)] >= 474 * (1ull << 20));
  CHECK(bytes[static_cast<size_t>(MemoryCategory::OptimizerState)] >= 2 * 474 * (1ull << 20));
  CHECK(bytes[static_cast<size_t>(MemoryCategory::Activation)] > bytes[static_cast<size_t>(MemoryCategory::Parameter)]);
}

TEST_CASE("a policy run records series that agree with the replay, and snapshots at the peak", "[gui]") {
  auto info = make_trace_info(test::make_fragmenting_trace(2000), "synthetic");
  PolicyRun run(info, "bestfit", {});
  while (run.state() == PolicyRun::State::Running) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  REQUIRE(run.state() == PolicyRun::State::Done);
  const RunResult& r = *run.result();
  const Peak& peak = r.replay.reserved;
  const ByteSeries& reserved = r.series[static_cast<int>(Series::Reserved)];
  REQUIRE(reserved.size() == info->events());
  CHECK(reserved.bytes_at(peak.event_index) >= peak.bytes);
  CHECK(reserved.bytes_at(peak.event_index) < peak.bytes + 1024);
  CHECK(r.pyramid[static_cast<int>(Series::Reserved)].range(0, info->events()).second ==
        ByteSeries::to_kib(peak.bytes));
  CHECK_FALSE(r.device_grows.empty());

  run.request_snapshot(peak.event_index);
  while (!run.settled_at(peak.event_index)) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto snap = run.snapshot();
  REQUIRE(snap);
  CHECK(snap->frag.reserved == peak.bytes);
  CHECK(snap->frag.reserved == r.replay.at_peak.reserved);
  CHECK(snap->frag.largest_free == r.replay.at_peak.largest_free);
  CHECK(std::is_sorted(snap->blocks.begin(), snap->blocks.end(),
                       [](const SnapshotBlock& a, const SnapshotBlock& b) { return a.addr < b.addr; }));
}

namespace {

// Replays to `index`, then asks the policy for `size` with the device capped at what it
// holds then (growth = out of memory, so the policy's own recovery runs). Was it served?
// `capped` false: no cap, and "served" means served from the memory already held.
bool served(const TraceInfo& info, const std::string& spec, uint64_t index, uint64_t size, bool capped) {
  SimDevice sim;
  LimitingDevice cap(sim);
  TrackingDevice device(cap);
  auto policy = make_policy(PolicySpec::parse(spec), device, info.trace.meta, &info.trace.events);
  ReplayOptions options;
  options.stop_before = index + 1;
  ReplayEngine engine(*policy, device, options);
  MemorySource source(info.trace);
  engine.run(source);
  uint64_t before = device.reserved_bytes();
  if (capped) cap.set_limit(before);
  auto block = policy->allocate({static_cast<AllocId>(engine.blocks().size()), size, 0, index + 1});
  return block && device.reserved_bytes() <= before;
}

}  // namespace

TEST_CASE("the largest request that fits is served within the memory held, one a bit larger is not", "[gui]") {
  auto info = make_trace_info(test::make_fragmenting_trace(1500, 11), "synthetic");
  for (uint64_t index : {info->events() / 3, info->events() / 2, info->events() - 1}) {
    CursorSnapshot snap = PolicyRun::build_snapshot(*info, "bestfit", {}, index, true);
    REQUIRE(snap.probed);
    REQUIRE(snap.largest_fit);
    uint64_t fit = *snap.largest_fit;
    CHECK(fit <= snap.frag.free_bytes);
    // Best fit serves anything its largest hole holds, without asking the device.
    CHECK(fit >= snap.frag.largest_free);
    CHECK(served(*info, "bestfit", index, snap.frag.largest_free, false));
    if (fit > 0) CHECK(served(*info, "bestfit", index, fit, true));
    CHECK_FALSE(served(*info, "bestfit", index, fit + std::max<uint64_t>(1024, fit / 128), true));
  }
  // passthrough gives every free back: nothing fits without a new cudaMalloc.
  CursorSnapshot pass = PolicyRun::build_snapshot(*info, "passthrough", {}, info->events() / 2, true);
  CHECK(pass.frag.free_bytes == 0);
  CHECK(pass.largest_fit == uint64_t{0});
}

TEST_CASE("a bad policy option fails the run with the registry's message", "[gui]") {
  auto info = make_trace_info(test::make_fragmenting_trace(50), "synthetic");
  PolicyRun run(info, "bestfit:no_such_option=1", {});
  while (run.state() == PolicyRun::State::Running) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(run.state() == PolicyRun::State::Failed);
  CHECK(run.error().find("no_such_option") != std::string::npos);
}

TEST_CASE("recent files keep the newest first, without duplicates, across sessions", "[gui]") {
  auto dir = std::filesystem::temp_directory_path() / "fraglab_gui_recent_test";
  std::filesystem::remove_all(dir);
  std::string file = (dir / "sub" / "recent").string();
  {
    RecentFiles recent(file);
    CHECK(recent.paths().empty());
    for (int i = 0; i < 20; ++i) REQUIRE(recent.add("/traces/t" + std::to_string(i % 15) + ".jsonl"));
    REQUIRE(recent.add("/traces/t3.jsonl"));
  }
  RecentFiles again(file);
  REQUIRE(again.paths().size() == RecentFiles::kMax);
  CHECK(again.paths()[0] == "/traces/t3.jsonl");
  CHECK(again.paths()[1] == "/traces/t4.jsonl");
  CHECK(std::count(again.paths().begin(), again.paths().end(), "/traces/t3.jsonl") == 1);
  std::filesystem::remove_all(dir);
}
