// Randomised allocator workloads recorded on an H200 (tests/data/snapshots/random, scripts/record_random_workloads.py):
// each replays exactly with the limit its own history shows, and plain replay reaches PyTorch's peak. Four of
// them failed before and each tests one reading: a side stream's expandable segment in a history begun late,
// an H200 told from an H100 by where a block went, and malloc's retry under a fraction that maps nothing.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "allocators/pytorch/gpu_memory.h"
#include "import/trace_import.h"
#include "sim/capacity.h"
#include "sim/fidelity.h"
#include "tests/snapshot_cases.h"

namespace fraglab {
namespace {

const std::string kRandom = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/random/";
constexpr uint64_t kH200 = 150109880320ull;

std::map<std::string, nlohmann::json> random_stats() {
  std::map<std::string, nlohmann::json> by_file;
  std::ifstream in(kRandom + "stats.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    by_file[j["file"].get<std::string>()] = j;
  }
  return by_file;
}

}  // namespace

TEST_CASE("random workloads: every recording replays exactly and plain replay reaches its peak",
          "[snapshot_cases][random]") {
  const auto stats = random_stats();
  REQUIRE(stats.size() == 11);
  for (const auto& [file, s] : stats) {
    INFO("trace " << file << " (" << s["conf"].get<std::string>() << ", fraction "
                  << (s["memory_fraction"].is_null() ? std::string("none") : s["memory_fraction"].dump()) << ", "
                  << s["history"].get<std::string>() << ")");
    const Trace trace = load_trace(kRandom + file);
    FidelityOptions options;
    options.capacity = capacity_for(trace, std::nullopt);
    const FidelityResult r = check_fidelity(trace, options);
    std::string context;
    for (const auto& l : r.context) context += l + "\n";
    INFO("divergence at event " << r.event_index << ": " << r.what << "\n" << context);
    CHECK(r.exact);
    const uint64_t peak = s["stats"]["reserved_bytes.all.peak"].get<uint64_t>();
    // A history begun late or wrapped may have left PyTorch's peak before its first entry.
    if (s["history"] == "full")
      CHECK(r.recorded_peak == peak);
    else
      CHECK(r.recorded_peak <= peak);
    CHECK(r.simulated_peak == r.recorded_peak);
    CHECK(test::plain_replay_peak(trace, options.capacity) == r.recorded_peak);
  }
}

TEST_CASE("random workloads: a side stream's expandable segment begun before the history is the large pool's",
          "[snapshot_cases][random]") {
  // The range the history unmaps is 3 large pages, which 30 small ones would also be, and the nearest range below
  // it is the side stream's small segment; the requests the history makes in it (4.7 MB, 2.7 MB) are large.
  const Trace trace = load_trace(kRandom + "random_129.pickle.gz");
  bool found = false;
  for (const RecordedSegment& s : trace.meta.initial.segments)
    if (s.address == 0x78fa000000) {
      found = true;
      CHECK_FALSE(s.small_pool);
      CHECK(s.is_expandable);
    }
  CHECK(found);
  CHECK(trace.meta.pools.size() == 1);  // no pool invented for the requests it holds
}

TEST_CASE("random workloads: an H200 is told from an H100 by the block PyTorch took", "[snapshot_cases][random]") {
  // expandable_segments:True,max_split_size_mb:64 without a fraction: every map fits an H100's ranges, but at event
  // 19,257 get_free_block's expandable_size loop passed a block whose segment's unmapped tail is shorter on an
  // H100 than the gap after the block PyTorch took.
  const Trace trace = load_trace(kRandom + "random_65.pickle.gz");
  CHECK(trace.meta.gpu_total_memory == kH200);
  CHECK(trace.meta.pools.size() == 1);
  // Read as an H100's, the model takes the other block and maps a page PyTorch did not.
  Trace as_h100 = trace;
  as_h100.meta.gpu_total_memory = detail::kH100TotalMemory;
  CHECK_FALSE(check_fidelity(as_h100, FidelityOptions{}).exact);
}

TEST_CASE("random workloads: malloc's retry under a fraction may map nothing", "[snapshot_cases][random]") {
  // expandable_segments:True,max_split_size_mb:64 at fraction 0.05, 10 retries and no OOM: runs of unmaps followed
  // by a request served from a block already mapped are malloc's (the fraction refused the request's segment;
  // after release_cached_blocks find_expandable_block handed out the free block before the lowest unmapped range),
  // not the program's empty_cache(), and they bound the limit.
  const Trace trace = load_trace(kRandom + "random_124.pickle.gz");
  const std::optional<uint64_t> limit = capacity_for(trace, std::nullopt);
  REQUIRE(limit);
  CHECK(*limit == static_cast<uint64_t>(0.05 * static_cast<double>(kH200)));
  CHECK(trace.meta.pools.size() == 1);
  // The same shape from the program's empty_cache() before its next request: read as malloc's retry it would
  // bound the limit below what the recording needed (random_2250, 0.015 with 4 OOMs, read before as a limit
  // that changed along the run); such a bound is dropped and the run read as the program's.
  const Trace emptied = load_trace(kRandom + "random_2250.pickle.gz");
  std::string note;
  CHECK(capacity_for(emptied, std::nullopt, &note) == static_cast<uint64_t>(0.015 * static_cast<double>(kH200)));
  CHECK(note.find("changed along the run") == std::string::npos);
}

TEST_CASE("random workloads: the collector's releases beside the program's empty_cache() under an H200's fraction",
          "[snapshot_cases][random]") {
  // The collector runs only under a memory fraction, and no OOM shows the GPU: the limit is found by replay among
  // fractions of each known GPU's memory, written with the fewest decimals first (0.03 of an H200, not 0.0529 of
  // an H100: the bytes differ by 7 MB, and the collector's threshold with them). In random_1102 the program's
  // empty_cache() before a new segment makes the collector's bounds contradict each other: the runs are read one
  // by one with the rules' pools (no pool invented) from the fraction that agrees longest.
  for (const char* file : {"random_48.pickle.gz", "random_1102.pickle.gz"}) {
    INFO(file);
    const Trace trace = load_trace(kRandom + file);
    std::string note;
    CHECK(capacity_for(trace, std::nullopt, &note) == static_cast<uint64_t>(0.03 * static_cast<double>(kH200)));
    CHECK(note.find("set_per_process_memory_fraction(0.03) of 150109880320 bytes") != std::string::npos);
    CHECK(trace.meta.pools.size() == 1);
    CHECK(check_fidelity(trace, FidelityOptions{.capacity = capacity_for(trace, std::nullopt)}).exact);
  }
  // Earlier H200 recordings under the collector were named as fractions of an H100's memory (0.0425, 0.1165).
  const std::string snapshots = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/";
  for (const auto& [file, fraction] :
       {std::pair<std::string, const char*>{
            "ranks_h200/ddp_uneven_oom.max_split_size_mb-32_garbage_collection_threshold-"
            "0.8_rank0_cap0.024.stacks.pickle.gz",
            "0.024"},
        {"resnet50_train.garbage_collection_threshold-0.6_h200_cap0.066.pickle.gz", "0.066"}}) {
    INFO(file);
    const Trace trace = load_trace(snapshots + file);
    std::string note;
    capacity_for(trace, std::nullopt, &note);
    CHECK(note.find(std::string("set_per_process_memory_fraction(") + fraction + ") of 150109880320 bytes") !=
          std::string::npos);
  }
}

}  // namespace fraglab
