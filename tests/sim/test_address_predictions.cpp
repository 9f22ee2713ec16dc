// What the CUDA address model is for: predictions without the recording's addresses. Every real run
// we have (traces/corpus and tools/cuda_addresses/recordings) replayed on the plain simulated device
// under its own settings, and each program's default recording replayed under the other runs'
// settings, must reach the real run's peak reserved byte for byte; without address hints, fidelity
// must stay exact on every bundled recording.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "allocators/registry.h"
#include "import/trace_import.h"
#include "sim/capacity.h"
#include "sim/fidelity.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "tests/every_recording.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

using namespace fraglab;

namespace {

const std::string kRoot = FRAGLAB_SOURCE_DIR;

struct RealRun {
  std::string path;      // the recording
  std::string workload;  // its program
  std::string conf;      // PYTORCH_CUDA_ALLOC_CONF, "default" = unset
  std::optional<uint64_t> capacity;
  uint64_t peak = 0;  // torch.cuda.memory_stats()'s reserved_bytes.all.peak
};

RealRun from_json(const nlohmann::json& j, const std::string& dir) {
  RealRun r{dir + "/" + j.at("file").get<std::string>(), j.at("workload"), j.at("conf"), std::nullopt,
            j.at("stats").at("reserved_bytes.all.peak").get<uint64_t>()};
  if (j.contains("capacity_bytes") && j["capacity_bytes"].is_number()) r.capacity = j["capacity_bytes"].get<uint64_t>();
  return r;
}

std::vector<RealRun> real_runs() {
  std::vector<RealRun> out;
  std::ifstream stats(kRoot + "/traces/corpus/stats.jsonl");
  std::string line;
  while (std::getline(stats, line))
    if (!line.empty()) out.push_back(from_json(nlohmann::json::parse(line), kRoot + "/traces/corpus"));
  const std::string recorded = kRoot + "/tools/cuda_addresses/recordings";
  for (const auto& entry : std::filesystem::directory_iterator(recorded))
    if (entry.path().extension() == ".json")
      out.push_back(from_json(nlohmann::json::parse(std::ifstream(entry.path())), recorded));
  return out;
}

uint64_t predicted_peak(const Trace& trace, const std::string& conf, std::optional<uint64_t> capacity) {
  SimDeviceConfig device;
  device.capacity = capacity;
  ReplayOptions options;
  MemorySource source(trace);
  std::string policy = conf == "default" ? "pytorch" : "pytorch:" + conf;
  return replay_simulated(source, PolicySpec::parse(policy), device, options, &trace.events).reserved.bytes;
}

std::string default_recording(const std::vector<RealRun>& runs, const std::string& workload) {
  for (const auto& r : runs)
    if (r.workload == workload && r.conf == "default" && !r.capacity) return r.path;
  return "";
}

}  // namespace

TEST_CASE("plain replay reaches every real run's peak; fidelity needs no address hints", "[address_predictions]") {
  auto runs = real_runs();
  REQUIRE(runs.size() >= 19);
  for (const auto& run : runs) {
    INFO(run.path);
    Trace trace = load_trace(run.path);
    CHECK(predicted_peak(trace, "default", run.capacity) == run.peak);  // plain pytorch: the recorded settings
    if (run.path.find("/traces/corpus/") == std::string::npos) continue;
    FidelityOptions options;
    options.capacity = run.capacity;
    options.hint_addresses = false;
    FidelityResult f = check_fidelity(trace, options);
    INFO("divergence at event " << f.event_index << ": " << f.what);
    CHECK(f.exact);
  }
}

TEST_CASE("a default recording predicts the other settings' real peaks", "[address_predictions]") {
  auto runs = real_runs();
  size_t pairs = 0;
  for (const auto& run : runs) {
    std::string source = default_recording(runs, run.workload);
    if (source.empty() || source == run.path || (run.conf == "default" && !run.capacity)) continue;
    INFO(run.path << " predicted from " << source);
    CHECK(predicted_peak(load_trace(source), run.conf, run.capacity) == run.peak);
    ++pairs;
  }
  CHECK(pairs >= 14);
}

// Snapshots as users take them (tests/data/snapshots): histories begun mid-run, wrapped rings, OOM'd
// runs. The segments that existed before the first entry are adopted through the simulated device, so
// the address model places them and every later segment around them; plain replay (the capacity
// inferred from recorded OOMs, retries and garbage collection, as `fraglab replay` does) must reach the
// recording's peak. Recordings
// that use private pools (CUDA graphs, torch.compile reduce-overhead, MemPool) are among them.
TEST_CASE("plain replay of mid-run and OOM'd snapshots reaches their recorded peak", "[address_predictions]") {
  size_t checked = 0, mid_run = 0;
  for (const std::filesystem::path& path : test::every_recording({kRoot + "/tests/data/snapshots"})) {
    const std::string name = path.filename().string();
    // Where the address model is known to part from the driver (docs/pytorch-model.md), in runs whose
    // releases fall by address among equal sizes: recorded on an H200 (the model follows the H100
    // driver's placement), and after the program's empty_cache() at every other step (the driver reuses
    // the freed ranges in an order the model does not follow); and a CLIP-style model whose process took
    // 352 MiB of device memory outside the allocator early on, which its later segments reused (the model
    // cannot see it). `fidelity` is exact on all; `fraglab replay` takes the recording's own addresses for
    // the pytorch policy at the recorded settings and reaches each peak (test_snapshot_cases.cpp). And a
    // transformer at the GPU's limit whose limit rose mid-run: a tie among equal-sized blocks broken
    // otherwise on the model's addresses left one 128 MiB segment fewer releasable at a later recovery
    // (diverged at entry 2,164 without the recorded addresses; the peak then 1.5 GB lower).
    if (name.find("_h200") != std::string::npos || name == "resnet50_train.default_empty2.pickle.gz" ||
        name.starts_with("clip_contrastive.") || name == "varlen_transformer_train.default_left5_hog4+3.pickle.gz")
      continue;
    INFO(name);
    Trace trace = load_trace(path.string());
    MemorySource stats_source(trace);
    const uint64_t recorded = compute_stats(stats_source).recorded_peak_reserved;
    REQUIRE(recorded > 0);
    const std::optional<uint64_t> capacity = capacity_for(trace, std::nullopt);  // as `fraglab replay` does
    CHECK(predicted_peak(trace, "default", capacity) == recorded);
    mid_run += !trace.meta.initial.empty();
    ++checked;
  }
  CHECK(checked >= test::at_least(20));
  CHECK(mid_run >= test::at_least(8));
}
