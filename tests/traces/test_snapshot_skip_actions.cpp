// Histories recorded with _record_memory_history(skip_actions=[...]) and global_record_annotations (PyTorch
// 2.11 on an H200: tests/data/snapshots/skip_actions, scripts/record_snapshot_cases.sh skipactions), and what
// a later PyTorch writes that 2.11 does not: `annotate` history entries and pinned host memory
// (tests/data/snapshots/handmade_2.14, made by hand: see the SOURCE.md there).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "allocators/pytorch/config.h"
#include "import/trace_import.h"
#include "report/program_attribution.h"
#include "report/trace_diff.h"
#include "sim/capacity.h"
#include "sim/fidelity.h"
#include "tests/snapshot_stats.h"
#include "traces/formats/pytorch/pytorch_snapshot.h"
#include "traces/io/gzip.h"
#include "traces/state_json.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

using namespace fraglab;

namespace {

const std::string kSkips = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/skip_actions/";
const std::string kHandmade = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/handmade_2.14/";

std::map<std::string, nlohmann::json> skip_stats() { return test::read_stats_jsonl(kSkips + "stats.jsonl"); }

std::string skipped_names(const Trace& t) {
  std::string out;
  for (const SkippedAction& s : t.meta.skipped_actions) out += (out.empty() ? "" : "; ") + s.action;
  return out;
}

FidelityResult fidelity(const Trace& trace) {
  FidelityOptions options;
  options.capacity = capacity_for(trace, std::nullopt);
  return check_fidelity(trace, options);
}

using test::recorded_peak;

}  // namespace

TEST_CASE("skip_actions: each recording is read, the skipped kind found from the data", "[snapshot_cases][skip]") {
  // file -> the kinds the reading reports skipped ("" where nothing is lost or nothing shows it)
  const std::map<std::string, std::string> expect = {
      {"stream_steps.default_annot.pickle.gz", ""},
      {"stream_steps.expandable_annot.pickle.gz", ""},
      {"stream_steps.default_skip-snapshot.pickle.gz", ""},
      {"stream_steps.default_skip-free_completed.pickle.gz", "free_completed"},
      {"stream_steps.expandable_skip-free_completed.pickle.gz", "free_completed"},
      {"stream_steps.default_skip-free_completed_annot_late2.pickle.gz", "free_completed"},
      {"stream_steps.default_skip-free_requested.pickle.gz", "free_requested"},
      {"stream_steps.default_skip-free_requested-free_completed.pickle.gz", "free_requested, free_completed"},
      {"stream_steps.default_skip-alloc.pickle.gz", "alloc"},
      {"stream_steps.default_skip-segment_alloc.pickle.gz", "segment_alloc"},
      {"stream_steps.default_skip-segment_free.pickle.gz", "segment_free"},
      {"stream_steps.expandable_skip-segment_map.pickle.gz", "segment_map"},
      {"stream_steps.expandable_skip-segment_unmap.pickle.gz", "segment_unmap"},
      // No device call at all: nothing tells a history without maps and unmaps from one whose ranges were all
      // mapped before it began (read so: docs/snapshots.md).
      {"stream_steps.expandable_skip-segment_map-segment_unmap.pickle.gz", ""},
  };
  auto stats = skip_stats();
  REQUIRE(stats.size() == expect.size());
  for (const auto& [file, kinds] : expect) {
    INFO(file);
    REQUIRE(stats.count(file) == 1);
    Trace t = load_trace(kSkips + file);
    CHECK(skipped_names(t) == kinds);
    for (const SkippedAction& s : t.meta.skipped_actions) CHECK(!s.reading.empty());
    // The streaming reading and the complete one agree here too.
    std::ifstream in(kSkips + file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    InflatedBytes raw = inflate_gzip(ss.str(), file);
    CHECK(parse_pytorch_snapshot(raw.bytes(), file, with_pytorch_model()) ==
          parse_pytorch_snapshot_complete(raw.bytes(), file, with_pytorch_model()));
  }
}

TEST_CASE("skip_actions: without free_completed, frees are taken at free_requested and say what that costs",
          "[snapshot_cases][skip]") {
  const std::string file = "stream_steps.default_skip-free_completed.pickle.gz";
  Trace t = load_trace(kSkips + file);
  REQUIRE(t.meta.skipped_actions.size() == 1);
  // The batches are allocated on a copy stream and used on the compute stream (record_stream).
  CHECK(t.meta.skipped_actions[0].reading.find("stream-ordered frees may be early (2 streams allocate here)") !=
        std::string::npos);
  uint64_t frees = 0, requests = 0;
  for (const Event& e : t.events) {
    frees += e.kind == EventKind::Free;
    requests += e.kind == EventKind::FreeRequested;
  }
  CHECK(requests == 0);
  CHECK(frees == skip_stats()[file]["actions"]["free_requested"].get<uint64_t>());
}

TEST_CASE("skip_actions: a history without allocations reads as the final state, and says why",
          "[snapshot_cases][skip]") {
  Trace t = load_trace(kSkips + "stream_steps.default_skip-alloc.pickle.gz");
  CHECK(t.meta.history_absent);
  REQUIRE(t.meta.skipped_actions.size() == 1);
  const std::string& why = t.meta.skipped_actions[0].reading;
  CHECK(why.find("cannot be replayed") != std::string::npos);
  // The device calls still show PyTorch's peak (reserved_bytes.all.peak: 514 MiB).
  CHECK(why.find("514.00 MiB reserved at most") != std::string::npos);
  uint64_t reserved = 0;
  for (const RecordedSegment& s : t.meta.segments) reserved += s.total_size;
  CHECK(t.meta.initial.reserved() == reserved);
}

TEST_CASE("skip_actions: replay is exact call for call where the data allows", "[snapshot_cases][skip]") {
  auto stats = skip_stats();
  for (const char* file :
       {"stream_steps.default_annot.pickle.gz", "stream_steps.expandable_annot.pickle.gz",
        "stream_steps.default_skip-snapshot.pickle.gz", "stream_steps.default_skip-free_requested.pickle.gz",
        "stream_steps.default_skip-segment_alloc.pickle.gz"}) {
    INFO(file);
    Trace t = load_trace(kSkips + file);
    FidelityResult r = fidelity(t);
    INFO("divergence at event " << r.event_index << ": " << r.what);
    CHECK(r.exact);
    CHECK(r.simulated_peak == r.recorded_peak);
    CHECK(recorded_peak(t) == stats[file]["stats"]["reserved_bytes.all.peak"].get<uint64_t>());
  }
}

TEST_CASE("annotations: record_function ranges are kept and give the program's steps", "[snapshot_cases][skip]") {
  Trace t = load_trace(kSkips + "stream_steps.default_annot.pickle.gz");
  CHECK(t.meta.annotations.size() == 48);
  uint64_t steps = 0;
  for (const Annotation& a : t.meta.annotations) steps += a.start && a.name.rfind("ProfilerStep#", 0) == 0;
  CHECK(steps == 8);
  ProgramAttribution program(t);
  CHECK(program.inferred_from().find("steps from the snapshot's annotations") != std::string::npos);
}

TEST_CASE("annotate entries, the legacy free and active_awaiting_free are read, not refused", "[snapshot][skip]") {
  Trace t = load_trace(kHandmade + "annotate_entries.json");
  std::vector<Annotation> marks;
  for (const Annotation& a : t.meta.annotations)
    if (a.mark) marks.push_back(a);
  REQUIRE(marks.size() == 3);
  CHECK(marks[0].name == "ProfilerStep#0");
  CHECK(marks[0].time_us == 100);
  CHECK(marks[1].name == "ProfilerStep#1");  // from its user_metadata
  CHECK(marks[2].name == "annotate");
  CHECK(!marks[0].start);
  // The legacy `free` completes the block; the history frees both of its allocations at A.
  uint64_t frees = 0;
  for (const Event& e : t.events) frees += e.kind == EventKind::Free;
  CHECK(frees == 2);
  REQUIRE(t.meta.segments.size() == 1);
  CHECK(t.meta.segments[0].blocks[1].state == RecordedBlock::State::ActivePendingFree);
  // The marks step the program as ProfilerStep ranges do.
  ProgramAttribution program(t);
  CHECK(program.inferred_from().find("steps from the snapshot's annotations") != std::string::npos);
  // Kept by the native format.
  CHECK(annotations_from_json(annotations_to_json(t.meta.annotations)) == t.meta.annotations);
}

TEST_CASE("host memory: host_segments and host_traces are summarised, not replayed", "[snapshot][skip]") {
  Trace t = load_trace(kHandmade + "host_memory.json");
  const HostMemory& h = t.meta.host;
  CHECK(h.segments == 1);
  CHECK(h.reserved == 4u << 20);
  CHECK(h.allocated == 1u << 20);
  CHECK(h.trace_entries == 10);
  CHECK(h.allocs == 3);
  CHECK(h.frees == 2);
  CHECK(h.segment_allocs == 2);
  CHECK(h.segment_frees == 1);
  CHECK(h.peak_allocated == 9u << 20);  // 2 + 1 MiB live, 2 freed, then the 8 MiB block beside the 1 MiB one
  CHECK(h.peak_reserved == 12u << 20);
  CHECK(host_memory_from_json(host_memory_to_json(h)) == h);
  // Device replay is untouched: the device history's allocations only.
  uint64_t allocs = 0;
  for (const Event& e : t.events) allocs += e.kind == EventKind::Alloc;
  CHECK(allocs == 3);
}

TEST_CASE("settings: PYTORCH_ALLOC_CONF, large_segment_size_mb and roundup_power2_divisions as a dict",
          "[snapshot][skip]") {
  // PyTorch 2.11 records the text under PYTORCH_CUDA_ALLOC_CONF whichever variable set it; a snapshot that
  // names the new variable reads the same.
  std::map<std::string, std::string> settings = {
      {"PYTORCH_ALLOC_CONF", "large_segment_size_mb:40,roundup_power2_divisions:[256:1,512:2,>:4]"},
      {"roundup_power2_divisions.256", "1"},
      {"roundup_power2_divisions.512", "2"},
      {"roundup_power2_divisions.1024", "4"}};
  auto conf = detail::recorded_conf(settings);
  REQUIRE(conf);
  CHECK(std::string(conf.variable) == "PYTORCH_ALLOC_CONF");
  detail::PytorchAllocatorConfig config;
  std::vector<std::string> unknown;
  config.apply_recorded(settings, &unknown);
  CHECK(unknown.empty());
  CHECK(config.large_segment_size == 40ull << 20);
  // The intervals the dict names (256 MiB: index 8; 512: 9; 1024 and above: 4).
  CHECK(config.divisions_for(256ull << 20) == 1);
  CHECK(config.divisions_for(512ull << 20) == 2);
  CHECK(config.divisions_for(1024ull << 20) == 4);
}

TEST_CASE("settings: diff shows a text recorded under PYTORCH_ALLOC_CONF", "[snapshot][skip]") {
  Trace t = load_trace(kHandmade + "annotate_entries.json");
  t.meta.allocator_settings.erase("PYTORCH_CUDA_ALLOC_CONF");
  t.meta.allocator_settings["PYTORCH_ALLOC_CONF"] = "max_split_size_mb:64";
  CHECK(summarize_run(t, "x", DiffOptions{}).recorded_conf == "max_split_size_mb:64");
}

TEST_CASE("the native and JSON Lines formats keep skipped actions, marks and host memory", "[snapshot][skip]") {
  for (const std::string& path : {kSkips + "stream_steps.default_skip-free_completed.pickle.gz",
                                  kHandmade + "host_memory.json", kHandmade + "annotate_entries.json"}) {
    INFO(path);
    Trace t = load_trace(path);
    for (const char* ext : {".fltrace", ".jsonl"}) {
      const std::string out =
          (std::filesystem::temp_directory_path() / ("fraglab_skip_" + std::to_string(::getpid()) + ext)).string();
      save_trace(t, out);
      Trace back = load_trace(out);
      CHECK(back.meta.skipped_actions == t.meta.skipped_actions);
      CHECK(back.meta.annotations == t.meta.annotations);
      CHECK(back.meta.host == t.meta.host);
      std::remove(out.c_str());
    }
  }
}
