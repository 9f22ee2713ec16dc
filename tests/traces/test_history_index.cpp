// The snapshot importer's index of a history (traces/formats/pytorch/history_index.h): the passes after the
// reading that visit only its device calls read the same as those that scan every entry.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "traces/formats/pytorch/entry_offsets.h"
#include "traces/formats/pytorch/history_index.h"
#include "traces/formats/pytorch/initial_state.h"
#include "traces/formats/pytorch/pytorch_snapshot.h"
#include "traces/formats/pytorch/settings_inference.h"
#include "traces/formats/pytorch/skipped_actions.h"

using namespace fraglab;
namespace fs = std::filesystem;

namespace {

HistoryIndex index_of(const std::vector<Event>& history) {
  HistoryIndex index;
  for (size_t i = 0; i < history.size(); ++i) index.note(history[i].kind, i);
  return index;
}

// A recording's history at address level (its events without those the import infers), and variants with a
// kind of entry taken out, as skip_actions would have left it.
std::vector<std::vector<Event>> histories_of(const Trace& t) {
  size_t prologue = 0;
  for (const RecordedSegment& s : t.meta.initial.segments) prologue += s.blocks.size();
  std::vector<Event> history;
  for (size_t i = prologue; i < t.events.size(); ++i)
    if (t.events[i].kind != EventKind::EmptyCache && t.events[i].kind != EventKind::PoolRelease)
      history.push_back(t.events[i]);
  std::vector<std::vector<Event>> out = {history};
  // Each kind whose absence a skipped-action reading infers from (the skip_actions recordings have the others).
  for (EventKind gone : {EventKind::FreeRequested, EventKind::Free, EventKind::SegmentFree, EventKind::SegmentUnmap}) {
    std::vector<Event> without;
    for (const Event& e : history)
      if (e.kind != gone) without.push_back(e);
    if (without.size() != history.size()) out.push_back(std::move(without));
  }
  out.emplace_back(history.begin() + static_cast<std::ptrdiff_t>(history.size() / 2), history.end());  // a ring's half
  return out;
}

std::vector<std::string> recordings() {
  std::vector<std::string> files;
  const std::string root = FRAGLAB_SOURCE_DIR;
  for (const std::string& dir :
       {root + "/traces/corpus/", root + "/tests/data/snapshots/", root + "/tests/data/snapshots/skip_actions/"})
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().string().ends_with(".pickle.gz")) files.push_back(e.path().string());
  return files;
}

}  // namespace

TEST_CASE("history index: the passes that visit only the device calls read as those that scan every entry",
          "[snapshot]") {
  const std::vector<std::string> files = recordings();
  REQUIRE(files.size() >= 50);
  // The imports also check the survey of the built events that the importer knows from what it wrote against a
  // pass over them (the pools' inference takes it instead of that pass).
  set_snapshot_import_self_check(true);
  struct Reset {
    ~Reset() { set_snapshot_import_self_check(false); }
  } reset;
  size_t histories = 0, skipped = 0, noted = 0, with_segments = 0, switched = 0, emptied = 0;
  for (const std::string& f : files) {
    INFO(f);
    const Trace t = read_pytorch_snapshot(f, ReadOptions{});
    emptied +=
        std::any_of(t.events.begin(), t.events.end(), [](const Event& e) { return e.kind == EventKind::EmptyCache; });
    // The expandable setting's switches: a trace whose device calls are all of the recorded setting's kind is
    // not scanned; the rest read as they do. A window left by an earlier reading goes either way.
    {
      const HistoryIndex index = index_of(t.events);
      Trace scanned = t, indexed = t;
      scanned.meta.expandable_flipped = indexed.meta.expandable_flipped = {{3, 9}};
      infer_expandable_switches(scanned, SnapshotModel{});
      infer_expandable_switches(indexed, SnapshotModel{}, &index);
      CHECK(scanned.meta.expandable_flipped == indexed.meta.expandable_flipped);
      switched += !scanned.meta.expandable_flipped.empty();
    }
    for (const std::vector<Event>& history : histories_of(t)) {
      ++histories;
      const HistoryIndex index = index_of(history);
      // Skipped actions: the same reading, and the history rewritten the same way.
      std::vector<Event> scanned = history, indexed = history;
      EntryOffsets scanned_offsets(history.size(), 7), indexed_offsets(history.size(), 7);
      const SkipReading a = read_skipped_actions(scanned, scanned_offsets, t.meta.segments);
      const SkipReading b = read_skipped_actions(indexed, indexed_offsets, t.meta.segments, &index);
      CHECK(a.skipped == b.skipped);
      CHECK(a.history_unusable == b.history_unusable);
      CHECK(a.requests_skipped == b.requests_skipped);
      CHECK(scanned == indexed);
      CHECK(scanned_offsets == indexed_offsets);
      skipped += !a.skipped.empty();
      // The large segment size the device calls show.
      TraceMeta m1 = t.meta, m2 = t.meta;
      m1.allocator_settings.erase(kNotedLargeSegmentSize);
      m2.allocator_settings.erase(kNotedLargeSegmentSize);
      if (m1.allocator_settings.empty())
        m1.allocator_settings["max_split_size"] = m2.allocator_settings["max_split_size"] = "-1";
      note_large_segment_size(m1, history);
      note_large_segment_size(m2, history, &index);
      CHECK(m1.allocator_settings == m2.allocator_settings);
      noted += m1.allocator_settings.count(kNotedLargeSegmentSize);
      // The state at the first entry.
      const InitialState s1 = reconstruct_initial_state(history, t.meta.segments, recorded_large_segment_size(t.meta));
      const InitialState s2 =
          reconstruct_initial_state(history, t.meta.segments, recorded_large_segment_size(t.meta), nullptr, &index);
      CHECK(s1 == s2);
      with_segments += !s1.segments.empty();
    }
  }
  // The comparisons saw every kind of reading: inferred skips, noted sizes, states with segments.
  CHECK(switched >= 3);
  CHECK(emptied >= 10);
  CHECK(histories >= 300);
  CHECK(skipped >= 50);
  CHECK(noted >= 1);
  CHECK(with_segments >= 100);
}

TEST_CASE("history index: a segment's request is the next one, past frees and OOMs, before any other device call",
          "[snapshot]") {
  constexpr uint64_t MiB = 1ull << 20;
  auto entry = [](EventKind k, Addr a, uint64_t size) {
    Event e;
    e.kind = k;
    e.addr = a;
    e.size = size;
    return e;
  };
  const Addr s = 0x7f0000000000;
  // 32 MiB segments made for 2-8 MiB requests: one with a free and an OOM between, one whose request comes
  // after another segment call (no vote), one whose next request is elsewhere (no vote).
  std::vector<Event> history = {
      entry(EventKind::SegmentAlloc, s, 32 * MiB),
      entry(EventKind::Free, s + 64 * MiB, 0),
      entry(EventKind::Oom, 0, 64 * MiB),
      entry(EventKind::Alloc, s, 4 * MiB),
      entry(EventKind::SegmentAlloc, s + 32 * MiB, 32 * MiB),
      entry(EventKind::SegmentFree, s + 96 * MiB, 2 * MiB),
      entry(EventKind::Alloc, s + 32 * MiB, 4 * MiB),
      entry(EventKind::SegmentAlloc, s + 128 * MiB, 32 * MiB),
      entry(EventKind::Alloc, s + 4 * MiB, 2 * MiB),
  };
  const HistoryIndex index = index_of(history);
  CHECK(index.others() == std::vector<size_t>{0, 2, 4, 5, 7});
  CHECK(index.count(EventKind::Alloc) == 3);
  for (const HistoryIndex* given : {static_cast<const HistoryIndex*>(nullptr), &index}) {
    TraceMeta m;
    m.allocator_settings["expandable_segments"] = "False";
    note_large_segment_size(m, history, given);
    CHECK(m.allocator_settings[kNotedLargeSegmentSize] == std::to_string(32 * MiB));
  }
}

TEST_CASE("entry offsets: 4 bytes each while they fit, every offset kept once one does not", "[snapshot]") {
  EntryOffsets offsets;
  offsets.reserve(4);
  offsets.push_back(17);
  offsets.push_back(uint64_t{3} << 30);
  CHECK(offsets[1] == uint64_t{3} << 30);
  offsets.push_back(uint64_t{5} << 32);  // past 4 GiB: the ones before are kept
  offsets.set(0, (uint64_t{1} << 40) + 9);
  REQUIRE(offsets.size() == 3);
  CHECK(offsets[0] == (uint64_t{1} << 40) + 9);
  CHECK(offsets[1] == uint64_t{3} << 30);
  CHECK(offsets.back() == uint64_t{5} << 32);
  offsets.resize(5, 1);
  CHECK(offsets[4] == 1);
  EntryOffsets narrow(2, 7), also(2, 7);
  CHECK(narrow == also);
  also.set(1, uint64_t{1} << 33);
  also.set(1, 7);
  CHECK(narrow == also);  // the same offsets, whatever the width
  also.clear();
  CHECK(also.empty());
}
