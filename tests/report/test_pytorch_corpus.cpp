// The pytorch policy against every real PyTorch 2.11 recording bundled in traces/corpus:
// read through the C++ snapshot reader, replayed call for call (fraglab fidelity), and the
// peak reserved compared with PyTorch's own memory_stats() (stats.jsonl) byte for byte.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "allocators/registry.h"
#include "import/trace_import.h"
#include "sim/fidelity.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "traces/trace_io.h"

using namespace fraglab;

namespace {

const std::string kCorpus = std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus";

struct Recorded {
  uint64_t peak_reserved = 0;
  std::optional<uint64_t> capacity;  // set_per_process_memory_fraction's limit
};

// stats.jsonl: one line per recording with torch.cuda.memory_stats() and the memory fraction.
std::map<std::string, Recorded> read_stats() {
  std::map<std::string, Recorded> out;
  std::ifstream in(kCorpus + "/stats.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    Recorded r;
    r.peak_reserved = j.at("stats").at("reserved_bytes.all.peak").get<uint64_t>();
    if (j.contains("memory_fraction") && j["memory_fraction"].is_number()) {
      // PyTorch's setMemoryFraction: allowed = fraction * total device memory, truncated.
      double fraction = j["memory_fraction"].get<double>();
      auto total = j.at("total_memory").get<uint64_t>();
      r.capacity = static_cast<uint64_t>(fraction * static_cast<double>(total));
      CHECK(*r.capacity == j.at("capacity_bytes").get<uint64_t>());
    }
    out[j.at("file").get<std::string>()] = r;
  }
  return out;
}

std::vector<std::string> corpus_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus)) {
    std::string name = entry.path().filename().string();
    if (name.size() > 10 && name.substr(name.size() - 10) == ".pickle.gz") files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("pytorch corpus: every recording replays exactly, peak reserved byte for byte", "[pytorch_corpus]") {
  auto stats = read_stats();
  auto files = corpus_files();
  REQUIRE(files.size() >= 13);
  for (const auto& [name, rec] : stats)
    CHECK(std::find(files.begin(), files.end(), name) != files.end());  // every stats line has its file
  for (const auto& name : files) {
    INFO("trace " << name);
    // The .stacks recording repeats its run with Python stacks (SOURCE.md): same counters.
    std::string key = name;
    if (!stats.count(key) && key.find(".stacks.") != std::string::npos) key.erase(key.find(".stacks."), 7);
    REQUIRE(stats.count(key) == 1);
    const Recorded& rec = stats[key];
    Trace trace = load_trace(kCorpus + "/" + name);
    FidelityOptions options;
    options.capacity = rec.capacity;
    FidelityResult r = check_fidelity(trace, options);
    std::string context;
    for (const auto& l : r.context) context += l + "\n";
    INFO("divergence at event " << r.event_index << ": " << r.what << "\n" << context);
    CHECK(r.exact);
    CHECK(r.device_calls > 0);
    CHECK(r.reserved_checks == r.replay_events);
    CHECK(r.simulated_peak == rec.peak_reserved);
    CHECK(r.recorded_peak == rec.peak_reserved);
  }
}

TEST_CASE("pytorch corpus: other settings are not exact (fidelity can fail)", "[pytorch_corpus]") {
  Trace trace = load_trace(kCorpus + "/gpt2_train.default.pickle.gz");
  FidelityOptions options;
  options.policy = "pytorch:max_split_size_mb:128";
  FidelityResult r = check_fidelity(trace, options);
  CHECK_FALSE(r.exact);
  CHECK_FALSE(r.what.empty());
  CHECK_FALSE(r.context.empty());
  options.policy = "pytorch:expandable_segments:True";
  CHECK_FALSE(check_fidelity(trace, options).exact);
}

TEST_CASE("pytorch corpus: invariants hold on replays under other settings (--check)", "[pytorch_corpus]") {
  for (std::string name :
       {"gpt2_train.default.pickle.gz", "side_stream_prefetch.default.pickle.gz", "seed_examples.default.pickle.gz"}) {
    Trace trace = load_trace(kCorpus + "/" + name);
    for (std::string policy : {"pytorch", "pytorch:expandable_segments:True",
                               "pytorch:max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,>:4]",
                               "pytorch:garbage_collection_threshold:0.6,max_split_size_mb:256"}) {
      INFO(name << " with " << policy);
      MemorySource source(trace);
      ReplayOptions options;
      options.check_invariants = true;
      SimDeviceConfig device;
      device.capacity = 20ull << 30;
      ReplayResult r;
      CHECK_NOTHROW(r = replay_simulated(source, PolicySpec::parse(policy), device, options));
      CHECK(r.ooms.empty());
      CHECK(r.events > 0);
    }
  }
}

TEST_CASE("pytorch corpus: fraglab fidelity CLI", "[pytorch_corpus]") {
  std::string trace = kCorpus + "/gpt2_train.expandable.pickle.gz";
  auto run = [](const std::string& cmd, std::string& out) {
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p);
    char buf[4096];
    size_t n;
    out.clear();
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  CHECK(run(std::string(FRAGLAB_CLI) + " fidelity " + trace, out) == 0);
  CHECK(out.rfind("exact:", 0) == 0);
  CHECK(run(std::string(FRAGLAB_CLI) + " fidelity --json " + trace, out) == 0);
  auto j = nlohmann::json::parse(out);
  CHECK(j["exact"] == true);
  CHECK(j["simulated_peak_reserved"] == 14543749120ull);
  CHECK(run(std::string(FRAGLAB_CLI) + " fidelity --policy pytorch:expandable_segments:False " + trace, out) == 1);
  CHECK(out.find("DIVERGED") != std::string::npos);
  CHECK(run(std::string(FRAGLAB_CLI) + " fidelity " + kCorpus + "/stats.jsonl 2>&1", out) == 2);
}
