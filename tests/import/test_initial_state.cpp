// The allocator state at a snapshot's first entry (traces/formats/pytorch/initial_state.h): what a
// history that begins mid-run held before it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "allocators/pytorch/caching_allocator.h"
#include "allocators/pytorch/limit_drift.h"
#include "allocators/registry.h"
#include "import/trace_import.h"
#include "report/diagnose.h"
#include "sim/capacity.h"
#include "sim/fidelity.h"
#include "sim/pool_checker.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "tests/snapshot_cases.h"
#include "tests/snapshot_stats.h"
#include "tests/tune_setting.h"
#include "traces/formats/pytorch/initial_state.h"
#include "traces/formats/pytorch/pool_inference.h"
#include "traces/formats/pytorch/settings_inference.h"
#include "traces/io/format_error.h"
#include "traces/state_json.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

using namespace fraglab;
using namespace fraglab::test;

TEST_CASE("initial state: segments freed in the history existed, those it allocated did not", "[snapshot_cases]") {
  std::vector<RecordedSegment> final_segments = {segment(0x100000000, 40 * MiB)};
  std::vector<Event> history = {entry(EventKind::SegmentFree, 0x200000000, 20 * MiB),
                                entry(EventKind::SegmentAlloc, 0x100000000, 40 * MiB)};
  InitialState st = reconstruct_initial_state(history, final_segments);
  REQUIRE(st.segments.size() == 1);
  CHECK(st.segments[0].address == 0x200000000);
  CHECK(st.segments[0].total_size == 20 * MiB);
  CHECK(st.reserved() == 20 * MiB);
}

TEST_CASE("initial state: expandable ranges undo maps and unmaps", "[snapshot_cases]") {
  // Final: one mapped range [base, base+60 MiB). The history mapped its last 20 MiB and unmapped a
  // 20 MiB range after it: at the start, [base, base+40) and [base+60, base+80) were mapped.
  Addr base = 0x300000000;
  std::vector<RecordedSegment> final_segments = {segment(base, 60 * MiB, true)};
  std::vector<Event> history = {entry(EventKind::SegmentUnmap, base + 60 * MiB, 20 * MiB),
                                entry(EventKind::SegmentMap, base + 40 * MiB, 20 * MiB)};
  InitialState st = reconstruct_initial_state(history, final_segments);
  REQUIRE(st.segments.size() == 2);
  CHECK(st.segments[0].address == base);
  CHECK(st.segments[0].total_size == 40 * MiB);
  CHECK(st.segments[1].address == base + 60 * MiB);
  CHECK(st.segments[1].total_size == 20 * MiB);
  CHECK(st.segments[1].is_expandable);
}

TEST_CASE("initial state: a block first freed was live; its end is where the next allocation in its gap starts",
          "[snapshot_cases]") {
  Addr s = 0x400000000;
  std::vector<RecordedSegment> final_segments = {segment(s, 20 * MiB)};
  std::vector<Event> history = {
      entry(EventKind::Alloc, s + 6 * MiB, 3 * MiB),      // lands in the free block after A: A was 6 MiB
      entry(EventKind::FreeRequested, s, 5 * MiB + 100),  // A: requested 5 MiB + 100 bytes
      entry(EventKind::Free, s, 5 * MiB + 100),
      entry(EventKind::Free, s + 12 * MiB, 1 * MiB + 512),  // B: completion only (requested before)
  };
  InitialState st = reconstruct_initial_state(history, final_segments);
  REQUIRE(st.segments.size() == 1);
  REQUIRE(st.segments[0].blocks.size() == 2);
  CHECK(st.live_blocks == 2);
  const RecordedBlock& a = st.segments[0].blocks[0];
  const RecordedBlock& b = st.segments[0].blocks[1];
  CHECK(a.address == s);
  CHECK(a.size == 6 * MiB);  // from the allocation at s + 6 MiB
  CHECK(a.requested_size == 5 * MiB + 100);
  CHECK(a.state == RecordedBlock::State::ActiveAllocated);
  CHECK(b.address == s + 12 * MiB);
  CHECK(b.size == 0);  // nothing shows where B ended: the replaying model estimates it
  CHECK(b.state == RecordedBlock::State::ActivePendingFree);
}

namespace {
// A small-pool segment at `s` holding two allocated blocks of 1024 bytes (1000 requested), at s + 512 and
// s + 4096.
RecordedSegment segment_with_two_blocks(Addr s) {
  RecordedSegment seg = segment(s, 2 * MiB);
  seg.small_pool = true;
  RecordedBlock b;
  b.size = 1024;
  b.requested_size = 1000;
  b.state = RecordedBlock::State::ActiveAllocated;
  for (Addr at : {s + 512, s + 4096}) {
    b.address = at;
    seg.blocks.push_back(b);
  }
  return seg;
}
}  // namespace

TEST_CASE("initial state: blocks live at the end that the history never mentions were live all along",
          "[snapshot_cases]") {
  Addr s = 0x500000000;
  RecordedSegment seg = segment_with_two_blocks(s);
  std::vector<Event> history = {entry(EventKind::Alloc, s + 4096, 1000)};
  InitialState st = reconstruct_initial_state(history, {seg});
  REQUIRE(st.segments.size() == 1);
  REQUIRE(st.segments[0].blocks.size() == 1);
  CHECK(st.segments[0].blocks[0].address == s + 512);
  CHECK(st.segments[0].blocks[0].size == 1024);  // exact: the final segments say so
  CHECK(st.segments[0].blocks[0].requested_size == 1000);
}

// A history begun after the first step of a run with expandable segments that empties the cache at every
// step: the first empty_cache() unmaps free pages right after blocks live at the first entry, which are
// mapped again and reused later. A live block's end is not where the first later allocation after it
// lands once its free space was unmapped in between (a block took 2.6 GB of pages as its own, the model
// kept them mapped and diverged at that first empty_cache(), and the pool check invented two pools).
TEST_CASE("initial state: pages unmapped while a block is live bound its end", "[snapshot_cases]") {
  auto stats = case_stats();
  const char* file = "bert_varlen_train.expandable_late1_empty1.pickle.gz";
  REQUIRE(stats.count(file) == 1);
  check_exact(file, stats[file]);
  Trace trace = load_trace(kCases + "/" + file);
  CHECK(trace.meta.pools.size() == 1);
  for (const RecordedSegment& s : trace.meta.initial.segments)
    for (const RecordedBlock& b : s.blocks) CHECK(b.size < (1ull << 30));  // no block swallows the freed pages
  // The same after step 2 of GPT-2, and in a wrapped ring of the two-stream prefetcher (both diverged too).
  for (const char* other :
       {"gpt2_train.expandable_late2_empty1.pickle.gz", "side_stream_prefetch.expandable_ring5000_empty1.pickle.gz"}) {
    REQUIRE(stats.count(other) == 1);
    check_exact(other, stats[other]);
    CHECK(load_trace(kCases + "/" + other).meta.pools.size() == 1);
  }
}

TEST_CASE("initial state: frees of blocks in no known segment are counted, not placed", "[snapshot_cases]") {
  std::vector<Event> history = {entry(EventKind::Free, 0x600000000, 4096)};
  InitialState st = reconstruct_initial_state(history, {});
  CHECK(st.live_blocks == 0);
  CHECK(st.unplaced_frees == 1);
  CHECK(st.segments.empty());
}

TEST_CASE("initial state: a history from process start has an empty state", "[snapshot_cases]") {
  Addr s = 0x700000000;
  RecordedSegment seg = segment(s, 20 * MiB);
  RecordedBlock b;
  b.address = s;
  b.size = 20 * MiB;
  b.requested_size = 20 * MiB;
  b.state = RecordedBlock::State::ActiveAllocated;
  seg.blocks = {b};
  std::vector<Event> history = {entry(EventKind::SegmentAlloc, s, 20 * MiB), entry(EventKind::Alloc, s, 20 * MiB)};
  CHECK(reconstruct_initial_state(history, {seg}).empty());
}

TEST_CASE("initial state: the allocated addresses given (a history that frees nothing first) read the same",
          "[snapshot_cases]") {
  // The importer passes the addresses it allocated when no entry freed an address first: the forward scan
  // is skipped, and a block of the final segments the history never mentions is still found.
  Addr s = 0x800000000;
  RecordedSegment seg = segment_with_two_blocks(s);  // the block at s + 4096 is allocated in the history
  std::vector<Event> history = {entry(EventKind::Alloc, s + 8192, 1000), entry(EventKind::Free, s + 8192, 1000),
                                entry(EventKind::Alloc, s + 4096, 1000)};
  AddrMap allocated;
  for (const Event& e : history)
    if (e.kind == EventKind::Alloc) allocated.insert(e.addr, 0);
  InitialState scanned = reconstruct_initial_state(history, {seg});
  InitialState given = reconstruct_initial_state(history, {seg}, 20 * MiB, &allocated);
  CHECK(given == scanned);
  REQUIRE(given.live_blocks == 1);
  CHECK(given.segments[0].blocks[0].address == s + 512);
  // With the mentioned block's address missing from the set, it reads as live at the start too.
  AddrMap partial;
  partial.insert(s + 8192, 0);
  CHECK(reconstruct_initial_state(history, {seg}, 20 * MiB, &partial).live_blocks == 2);
}
