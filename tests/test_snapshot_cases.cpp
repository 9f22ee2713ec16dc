// Snapshots as users take them (tests/data/snapshots, recorded on an H100 with PyTorch 2.11 by
// scripts/record_snapshot_cases.sh): histories that begin after the model was built, ring buffers
// that wrapped, snapshots without history, OOMs under a memory fraction. Each replays call for call
// from the state reconstructed at its first entry, and its recorded peak is PyTorch's own counter
// (reserved_bytes.all.peak, reset when recording began).
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

namespace {

const std::string kCases = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots";

std::map<std::string, nlohmann::json> case_stats() { return test::snapshot_stats(kCases); }

using test::recorded_peak;

// `fraglab replay --policy pytorch` (the simulated driver's addresses) under `capacity`: its reserved peak.
uint64_t plain_replay_peak(const Trace& trace, std::optional<uint64_t> capacity) {
  SimDeviceConfig config;
  config.capacity = capacity;
  MemorySource source(trace);
  ReplayOptions options;
  options.oracle_bound = false;
  options.on_oom = OnOom::Skip;
  return replay_simulated(source, PolicySpec::parse("pytorch"), config, options, &trace.events).reserved.bytes;
}

void check_exact(const std::string& file, const nlohmann::json& stats) {
  INFO("trace " << file);
  Trace trace = load_trace(kCases + "/" + file);
  FidelityOptions options;
  // The job's memory fraction where it set one, else the limit the recording shows (the GPU's own, say).
  options.capacity = stats["capacity_bytes"].is_number()
                         ? std::optional<uint64_t>(stats["capacity_bytes"].get<uint64_t>())
                         : capacity_for(trace, std::nullopt);
  FidelityResult r = check_fidelity(trace, options);
  std::string context;
  for (const auto& l : r.context) context += l + "\n";
  INFO("divergence at event " << r.event_index << ": " << r.what << "\n" << context);
  CHECK(r.exact);
  CHECK(r.ooms == stats["trace_ooms"].get<uint64_t>());
  const uint64_t peak = stats["stats"]["reserved_bytes.all.peak"].get<uint64_t>();
  CHECK(r.simulated_peak == r.recorded_peak);
  CHECK(recorded_peak(trace) == r.recorded_peak);
  // A wrapped ring may have dropped the entries of PyTorch's peak (bert_varlen_oom's ring8000 reached
  // it before its last 8,000 entries): then no replay of the window can show it.
  const bool wrapped = stats["max_entries"].is_number() && stats["trace_entries"] == stats["max_entries"];
  if (wrapped)
    CHECK(r.recorded_peak <= peak);
  else
    CHECK(r.recorded_peak == peak);
  if (stats["at_record_start"].is_object() && stats["record"] != "start" && stats["record"] != "state") {
    // Recording began late: the state at the first entry is what PyTorch held then.
    CHECK(trace.meta.initial.reserved() == stats["at_record_start"]["reserved_bytes.all.current"].get<uint64_t>());
    // Blocks were live then exactly when PyTorch had bytes allocated (mempool_oom_fallback's late start
    // comes after the reserve was freed: its segments are all cached).
    CHECK((trace.meta.initial.live_blocks > 0) ==
          (stats["at_record_start"]["allocated_bytes.all.current"].get<uint64_t>() > 0));
  }
}

// check_exact for each file, and plain replay (the model's own addresses, the capacity inferred) reaching
// the recorded peak.
void check_cases(std::initializer_list<const char*> files) {
  auto stats = case_stats();
  for (const char* file : files) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
    Trace trace = load_trace(kCases + "/" + file);
    INFO("plain replay of " << file);
    CHECK(plain_replay_peak(trace, capacity_for(trace, std::nullopt)) == recorded_peak(trace));
  }
}

}  // namespace

TEST_CASE("snapshot cases: late and ring-buffered histories replay exactly from their first entry",
          "[snapshot_cases]") {
  auto stats = case_stats();
  for (const char* file :
       {"gpt2_train.default_late2.pickle.gz", "gpt2_train.expandable_late2.pickle.gz",
        "bert_varlen_train.default_ring60000.pickle.gz", "bert_varlen_train.expandable_ring60000.pickle.gz",
        "side_stream_prefetch.default_ring700.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
  }
}

TEST_CASE("snapshot cases: OOM'd runs under a memory fraction replay exactly with their capacity", "[snapshot_cases]") {
  auto stats = case_stats();
  for (const char* file :
       {"gpt2_oom_backoff.default_cap0.12.stacks.pickle.gz", "gpt2_oom_backoff.expandable_cap0.12.pickle.gz",
        "bert_varlen_oom.default_cap0.16.pickle.gz", "bert_varlen_oom.expandable_cap0.16.pickle.gz",
        "observer_oom_mlp.default_cap0.07_atoom.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
  }
}

// Runs the model had not seen, recorded on an H200 (scripts/record_unseen_h200.py): a GPT-2-architecture
// LM trained in bf16 on varying sequence lengths under expandable segments with max_split_size_mb or the
// collector, each at set_per_process_memory_fraction(0.1) until its OOM, and a torch.compile'd MLP whose
// entries carry compile_context. Exact, plain replay at the peak; the fraction is named of the H200's own
// memory, which the OOM's free device memory shows is larger than an H100's.
TEST_CASE("snapshot cases: an H200's recordings name the fraction of its own memory", "[snapshot_cases]") {
  check_cases(
      {"lm_bf16_varlen.expandable_segments-True_max_split_size_mb-128_cap0.1_h200.stacksall.pickle.gz",
       "lm_bf16_varlen.expandable_segments-True_garbage_collection_threshold-0.6_cap0.1_h200.stacksall.pickle.gz",
       "compiled_mlp.default_compile_context_h200.stacksall.pickle.gz"});
  auto stats = case_stats();
  for (const char* file :
       {"lm_bf16_varlen.expandable_segments-True_max_split_size_mb-128_cap0.1_h200.stacksall.pickle.gz",
        "lm_bf16_varlen.expandable_segments-True_garbage_collection_threshold-0.6_cap0.1_h200.stacksall.pickle.gz"}) {
    INFO(file);
    Trace trace = load_trace(kCases + "/" + file);
    std::string note;
    CHECK(capacity_for(trace, std::nullopt, &note) == stats[file]["capacity_bytes"].get<uint64_t>());
    CHECK(note.find("set_per_process_memory_fraction(0.1) of 150109880320 bytes") != std::string::npos);
  }
  CHECK(gpu_total_memory_at_least(1) == detail::kH100TotalMemory);
  CHECK(gpu_total_memory_at_least(detail::kH100TotalMemory + 1) == 150109880320ull);
  CHECK(gpu_total_memory_at_least(150109880321ull) == 140ull << 30);
}

// More runs the model had not seen (2026-11-29, H200, scripts/record_unseen_h200.py): a Lightning-style loop
// (bf16 LM, gradient accumulation over micro-batches of varying length, pinned non_blocking copies, validation
// bracketed by empty_cache(), a host checkpoint) under expandable_segments with max_split_size_mb:128, issue
// 39's combination, also at fraction 0.02 until its OOM; a varying-resolution ResNet-50 under expandable with
// the collector and max_split_size_mb, and under a roundup_power2_divisions dict with max_split_size_mb.
TEST_CASE("snapshot cases: a Lightning-style loop and a varying-size ResNet under combined settings (H200)",
          "[snapshot_cases]") {
  check_cases({"lightning_like.expandable_segments-True_max_split_size_mb-128_h200.stacksall.pickle.gz",
               "lightning_like.expandable_segments-True_max_split_size_mb-128_cap0.02_h200.stacksall.pickle.gz",
               "resnet_varsize.expandable_segments-True_garbage_collection_threshold-0.6_max_split_size_mb-256_h200."
               "stacksall.pickle.gz",
               "resnet_varsize.roundup_power2_divisions-dict_max_split_size_mb-200_h200.stacksall.pickle.gz"});
  // The same program run under three other settings (other_settings_runs.jsonl, PyTorch's own peaks): tune's
  // prediction of each from the expandable + max_split_size_mb recording is the real run's peak, and its best
  // setting (max_split_size_mb dropped: the recorded combination reserved 2.9x what expandable alone does)
  // reserves no more than the best real run.
  std::ifstream in(kCases + "/other_settings_runs.jsonl");
  std::string recorded_as;
  std::vector<std::pair<std::string, uint64_t>> runs;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["recorded_as"].is_string()) recorded_as = j["recorded_as"].get<std::string>();
    runs.emplace_back(j["conf"] == "default" ? "" : j["conf"].get<std::string>(),
                      j["stats"]["reserved_bytes.all.peak"].get<uint64_t>());
  }
  REQUIRE(runs.size() == 4);
  REQUIRE(!recorded_as.empty());
  TuneOptions o;
  o.jobs = 2;
  for (const auto& [conf, peak] : runs) o.also.push_back(conf);
  const TuneReport r = tune(kCases + "/" + recorded_as, o);
  uint64_t best_real = UINT64_MAX;
  for (const auto& [conf, peak] : runs) {
    INFO("setting '" << conf << "'");
    const TuneCandidate* c = test::find_setting(r, conf);
    REQUIRE(c);
    CHECK(c->peak_reserved == peak);
    best_real = std::min(best_real, peak);
  }
  CHECK(r.best().peak_reserved <= best_real);
  CHECK(r.best().conf.find("max_split_size_mb") == std::string::npos);
}

// The GPU itself ran out, with no memory fraction (group `deviceoom`): cudaMalloc or cuMemCreate failed,
// each `oom` entry recording the little free memory left. The limit is reserved + that free memory, and it
// is the device's: PyTorch checks no fraction, so an expandable segment is refused only the pages it maps
// (under a fraction, alloc_block refuses the whole get_allocation_size() first). The model read the limit
// as a fraction and the expandable run diverged at its first map after an OOM.
TEST_CASE("snapshot cases: OOMs or retries where the GPU itself ran out replay exactly under the GPU's limit",
          "[snapshot_cases]") {
  auto stats = case_stats();
  for (const char* file :
       {"gpt2_oom_backoff.default_left9.6.pickle.gz", "gpt2_oom_backoff.expandable_left9.6.pickle.gz",
        "gpt2_oom_backoff.default_left9.6_late1.pickle.gz", "bert_varlen_oom.default_left12.8.pickle.gz",
        "bert_varlen_oom.expandable_left12.8.pickle.gz", "bert_varlen_oom.default_left12.8_ring8000.pickle.gz",
        "gpt2_oom_backoff.expandable_left9.6_late1.pickle.gz",
        "bert_varlen_oom.expandable_left12.8_ring20000.pickle.gz",
        "bert_varlen_oom.roundup_power2_divisions-4_left12.8.pickle.gz",
        "bert_varlen_oom.max_split_size_mb-128_left12.8.pickle.gz",
        // Taken by an out-of-memory observer inside malloc (group `observer`), as PyTorch's docs suggest; the
        // last one, with the collector's threshold set and no fraction, diverged when read as a fraction.
        "observer_oom_mlp.default_left6_atoom.pickle.gz", "observer_oom_mlp.expandable_left6_atoom.pickle.gz",
        "observer_oom_mlp.default_left6_ring3000_atoom.pickle.gz",
        "observer_oom_mlp.garbage_collection_threshold-0.6_max_split_size_mb-256_left6_late3_atoom.pickle.gz"}) {
    INFO(file);
    REQUIRE(stats.count(file) == 1);
    REQUIRE(stats[file]["memory_fraction"].is_null());
    if (stats[file]["trace_ooms"].get<uint64_t>() > 0) {
      auto inferred = infer_capacity(load_trace(kCases + "/" + file));
      REQUIRE(inferred);
      CHECK(inferred->device_limit);
      CHECK_FALSE(inferred->fraction);
    }
    check_exact(file, stats[file]);
  }
  // No OOM says the limit is the GPU's: the collector's threshold is set, and read as a fraction the collector
  // would have run. Only the GPU's own limit reproduces the retries, at the peak the recording held.
  const std::string retried =
      "bert_varlen_oom.max_split_size_mb-128_garbage_collection_threshold-0.6_left12.8.pickle.gz";
  REQUIRE(stats.count(retried) == 1);
  REQUIRE(stats[retried]["trace_ooms"] == 0);
  Trace no_oom = load_trace(kCases + "/" + retried);
  CHECK(no_oom.meta.gpu_limit);
  CHECK(std::none_of(no_oom.events.begin(), no_oom.events.end(),
                     [](const Event& e) { return e.kind == EventKind::EmptyCache; }));
  bool gpu_limit = false;
  CHECK(capacity_for(no_oom, std::nullopt, nullptr, &gpu_limit) ==
        std::optional<uint64_t>(stats[retried]["stats"]["reserved_bytes.all.peak"].get<uint64_t>()));
  CHECK(gpu_limit);
  check_exact(retried, stats[retried]);
  FidelityOptions fraction_reading;
  fraction_reading.policy = "pytorch:limit=fraction";
  fraction_reading.capacity = capacity_for(no_oom, std::nullopt);
  CHECK_FALSE(check_fidelity(no_oom, fraction_reading).exact);
  for (const char* ext : {".fltrace", ".jsonl"}) {  // converted, the trace keeps what its limit was
    const std::string path =
        (std::filesystem::temp_directory_path() / ("fraglab_gpu_limit_" + std::to_string(::getpid()) + ext)).string();
    save_trace(no_oom, path);
    Trace back = load_trace(path);
    std::filesystem::remove(path);
    CHECK(back.meta.gpu_limit);
    FidelityOptions options;
    bool back_gpu_limit = false;
    options.capacity = capacity_for(back, std::nullopt, nullptr, &back_gpu_limit);
    CHECK(options.capacity == capacity_for(no_oom, std::nullopt));  // fractions are tried as fractions there too
    CHECK(back_gpu_limit);
    CHECK(check_fidelity(back, options).exact);
  }
  // Read as a fraction, the expandable run's segment check takes the whole request, not the pages mapped:
  // no one fraction fits its calls (the model would follow a limit moving along the trace); as the GPU's
  // own limit, one does.
  Trace expandable = load_trace(kCases + "/gpt2_oom_backoff.expandable_left9.6.pickle.gz");
  detail::PytorchAllocatorConfig expandable_config;
  expandable_config.apply_recorded(expandable.meta.allocator_settings);
  CHECK_FALSE(detail::limit_drift(expandable.events, expandable.meta.initial.reserved(), expandable_config,
                                  detail::PytorchLimit::Fraction, *capacity_for(expandable, std::nullopt))
                  .empty());
  FidelityOptions as_gpu;
  as_gpu.capacity = capacity_for(expandable, std::nullopt);
  as_gpu.policy = "pytorch:limit=gpu";
  CHECK(check_fidelity(expandable, as_gpu).exact);
}

// `_record_memory_history(enabled="state")` keeps the live blocks' stacks and no history, yet PyTorch 2.11
// leaves one `free_completed` entry in it: read as a history begun mid-run, it replays exactly.
TEST_CASE("snapshot cases: a state-only recording replays from its state", "[snapshot_cases]") {
  auto stats = case_stats();
  for (const char* file : {"gpt2_train.default_state.pickle.gz", "side_stream_prefetch.expandable_state.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
  }
}

// A what-if on a history begun mid-run: max_split_size set where the recording had none, under a capacity.
// The adopted state holds free blocks of max_split_size or more that are parts of segments (PyTorch never
// splits one under the setting), and malloc's release_available_cached_blocks tried to cudaFree one: a
// device misuse, exit 3, on most mid-run snapshots (and `tune` and `diagnose` with them). They stay cached.
TEST_CASE("pytorch: a what-if max_split_size on a mid-run history keeps split oversize blocks cached",
          "[snapshot_cases]") {
  for (const char* file : {"gpt2_train.default_late2.pickle.gz", "bert_varlen_train.default_ring60000.pickle.gz"}) {
    INFO(file);
    Trace trace = load_trace(kCases + "/" + file);
    REQUIRE_FALSE(trace.meta.initial.empty());
    MemorySource source(trace);
    ReplayOptions options;
    options.on_oom = OnOom::Skip;
    options.check_invariants = true;
    SimDeviceConfig config;
    config.capacity = recorded_peak(trace) / 10 * 9;
    ReplayResult r;
    REQUIRE_NOTHROW(r = replay_simulated(source, PolicySpec::parse("pytorch:max_split_size_mb:32"), config, options,
                                         &trace.events));
    CHECK(r.reserved.bytes <= *config.capacity);
  }
}

TEST_CASE("pytorch: limit=auto reads a capacity as the GPU's only where the trace's OOMs were the GPU's",
          "[snapshot_cases]") {
  Event gpu_oom{};
  gpu_oom.kind = EventKind::Oom;
  gpu_oom.size = 402653184;         // 384 MiB: a 384 MiB segment
  gpu_oom.addr = 156 * (1u << 20);  // device_free: 156 MiB
  CHECK(detail::pytorch_oom_was_gpus(gpu_oom));
  Event fraction_oom = gpu_oom;
  fraction_oom.addr = 60ull << 30;  // 60 GiB free: the fraction refused
  CHECK_FALSE(detail::pytorch_oom_was_gpus(fraction_oom));
  Event unrecorded = gpu_oom;
  unrecorded.addr = 0;  // PyTorch before 2.1 recorded no free memory
  CHECK_FALSE(detail::pytorch_oom_was_gpus(unrecorded));
  SimDevice sim;
  TraceMeta meta;
  CHECK_THROWS_AS(make_policy(PolicySpec::parse("pytorch:limit=some"), sim, meta), PolicyConfigError);
}

// The reserved bytes the recording held just before event `index`: the state at the first entry plus
// the recorded device calls before it.
uint64_t recorded_reserved_before(const Trace& trace, uint64_t index) {
  uint64_t reserved = trace.meta.initial.reserved();
  for (uint64_t i = 0; i < index; ++i) {
    const Event& e = trace.events[i];
    if (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap) reserved += e.size;
    if (e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentUnmap) reserved -= e.size;
  }
  return reserved;
}

// diagnose shows the state the recording had: a history begun mid-run starts from the state at its first
// entry (its stepped replay laid the prologue out anew, so a late OOM showed 8.06 GiB reserved for the
// recording's 8.35), and a snapshot without history is looked at as its state (it showed the first of its
// three live blocks).
TEST_CASE("diagnose: the states shown are the recording's, mid-run and without history", "[snapshot_cases]") {
  Trace late = load_trace(kCases + "/gpt2_oom_backoff.default_cap0.12_late2.pickle.gz");
  REQUIRE_FALSE(late.meta.initial.empty());
  DiagnoseOptions o;
  o.search = false;
  DiagnoseReport r = diagnose(late, "late", capacity_for(late, std::nullopt), o);
  REQUIRE_FALSE(r.ooms.empty());
  for (const Diagnosis& d : r.ooms) {
    INFO("OOM at event " << d.event_index);
    CHECK(d.state.reserved == recorded_reserved_before(late, d.event_index));
  }
  Trace state = load_trace(kCases + "/gpt2_train.default_nohistory.pickle.gz");
  REQUIRE(state.meta.history_absent);
  DiagnoseReport s = diagnose(state, "state", std::nullopt, o);
  REQUIRE(s.ooms.size() == 1);
  CHECK(s.ooms[0].state.reserved == state.meta.initial.reserved());
  uint64_t live = 0;
  for (const Event& e : state.events) live += e.kind == EventKind::Alloc ? e.size : 0;
  CHECK(s.ooms[0].state.requested == live);
  CHECK(s.note.find("without history") != std::string::npos);
}

// The recorded OOMs that fail again in the replay are not allocations "the recording served".
TEST_CASE("diagnose: recorded OOMs failing again are no disagreement", "[snapshot_cases]") {
  for (const char* file :
       {"gpt2_oom_backoff.default_cap0.12.stacks.pickle.gz", "gpt2_oom_backoff.default_left9.6.pickle.gz"}) {
    INFO(file);
    Trace trace = load_trace(kCases + "/" + file);
    DiagnoseOptions o;
    o.search = false;
    DiagnoseReport r = diagnose(trace, file, capacity_for(trace, std::nullopt), o);
    CHECK(r.note.find("also fails") == std::string::npos);
    CHECK(r.ooms.size() == 3);
  }
}

// The garbage collector under a memory fraction, with no OOM (group `gcfraction`): the limit shows only
// in the collector's releases, and which blocks it frees depends on the exact limit. Without --capacity,
// capacity_for must find the fraction the job set (checked by replaying the model under the fractions the
// releases allow); with it the pools stay the default ones (a model without the limit, never collecting,
// disagreed with the recording and took a new segment for a private pool's), and the replay is exact.
TEST_CASE("snapshot cases: the garbage collector under a memory fraction shows the limit without an OOM",
          "[snapshot_cases]") {
  auto stats = case_stats();
  for (const char* file : {"bert_varlen_train.garbage_collection_threshold-0.6_cap0.27.pickle.gz",
                           "resnet50_train.garbage_collection_threshold-0.6_cap0.115.pickle.gz",
                           "side_stream_prefetch.garbage_collection_threshold-0.5_cap0.0375.pickle.gz"}) {
    INFO("trace " << file);
    REQUIRE(stats.count(file) == 1);
    Trace trace = load_trace(kCases + "/" + file);
    CHECK(trace.meta.pools.size() == 1);
    std::string note;
    const std::optional<uint64_t> capacity = capacity_for(trace, std::nullopt, &note);
    INFO(note);
    REQUIRE(capacity);
    CHECK(*capacity == stats[file]["capacity_bytes"].get<uint64_t>());
    CHECK(note.find("reproduces the recorded device calls") != std::string::npos);
    FidelityOptions options;
    options.capacity = capacity;
    FidelityResult r = check_fidelity(trace, options);
    INFO("divergence at event " << r.event_index << ": " << r.what);
    CHECK(r.exact);
    CHECK(r.device_calls > 0);
    CHECK(r.recorded_peak == stats[file]["stats"]["reserved_bytes.all.peak"].get<uint64_t>());
    // Without the limit the model collects nothing and diverges where the collector first released.
    CHECK_FALSE(check_fidelity(trace, FidelityOptions{}).exact);
  }
  // Histories begun after the collector's releases, or wrapped past them: nothing tells the limit, and
  // nothing needs it.
  for (const char* file : {"gpt2_train.garbage_collection_threshold-0.5_cap0.3_late2.pickle.gz",
                           "llama_train_ckpt.garbage_collection_threshold-0.55_cap0.35_ring20000.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    Trace trace = load_trace(kCases + "/" + file);
    CHECK_FALSE(capacity_for(trace, std::nullopt));
    check_exact(file, stats[file]);
  }
  // On an H200 (150 GB) the job's fraction is of another total: the limit found is a fraction of the H100's
  // that the recording cannot tell from the job's (the same device calls), not the job's own bytes.
  for (const char* file : {"resnet50_train.garbage_collection_threshold-0.6_h200_cap0.066.pickle.gz",
                           "side_stream_prefetch.garbage_collection_threshold-0.5_h200_cap0.021.pickle.gz"}) {
    INFO("trace " << file);
    REQUIRE(stats.count(file) == 1);
    Trace trace = load_trace(kCases + "/" + file);
    const std::optional<uint64_t> capacity = capacity_for(trace, std::nullopt);
    REQUIRE(capacity);
    const auto recorded = stats[file]["capacity_bytes"].get<uint64_t>();
    CHECK(*capacity != recorded);
    CHECK(std::max(*capacity, recorded) - std::min(*capacity, recorded) < recorded / 100);
    FidelityOptions options;
    options.capacity = capacity;
    CHECK(check_fidelity(trace, options).exact);
    CHECK_FALSE(check_fidelity(trace, FidelityOptions{}).exact);
  }
  // The corpus recording with the collector at 0.6 under a fraction of 0.25, no OOM: 0.2, the fraction of
  // fewest decimals in its bounds, diverges; 0.25 is the first that reproduces it.
  Trace gpt2 =
      load_trace(std::string(FRAGLAB_SOURCE_DIR) +
                 "/traces/corpus/gpt2_train.garbage_collection_threshold-0.6_max_split_size_mb-256_cap0.25.pickle.gz");
  CHECK(capacity_for(gpt2, std::nullopt) == std::optional<uint64_t>(21254373376ull));
}

// Runs of segment releases before a new segment that the program's torch.cuda.empty_cache() or malloc's
// own releases (the garbage collector, the retry under a limit) made: the importer marks them, the model
// replays both readings, and the one it reproduces stands (traces/formats/pytorch/pool_inference.h). Without the
// model's judgement the garbage-collection setting made every such run malloc's, and the emptied cache of
// torch.cuda.graph() (or of the program) diverged, or was absorbed into an invented pool.
TEST_CASE("snapshot cases: the program's empty_cache() and malloc's own releases are told apart by replay",
          "[snapshot_cases]") {
  auto stats = case_stats();
  struct Case {
    const char* file;
    long empty_caches;  // what the trace keeps as the program's
  };
  for (const Case& c : {
           // the threshold set without a fraction (the collector never runs): graph captures' empty_cache()
           Case{"graph_mlp_train.garbage_collection_threshold-0.6.pickle.gz", 2},
           Case{"graphs_two_pools.garbage_collection_threshold-0.6.pickle.gz", 2},
           Case{"seed_examples.garbage_collection_threshold-0.6.pickle.gz", 1},
           // no allocator_settings (older snapshots): the collector may be on, as far as the importer knows
           Case{"graph_mlp_train.default_nosettings.pickle.gz", 2},
           // the program's empty_cache() every other step, reserved bytes at the peak before it
           Case{"resnet50_train.default_empty2.pickle.gz", 4},
           Case{"gpt2_train.garbage_collection_threshold-0.6_max_split_size_mb-128_empty2.pickle.gz", 2},
           // expandable segments: empty_cache() unmaps the free pages; under a fraction with the collector
           Case{"resnet50_train.expandable_empty2.pickle.gz", 4},
           Case{"llama_train_ckpt.expandable_segments-True_garbage_collection_threshold-0.6_cap0.2_empty2.pickle.gz",
                2},
           // the collector alone under a fraction: its releases are malloc's
           Case{"bert_varlen_train.garbage_collection_threshold-0.6_cap0.27.pickle.gz", 0},
           Case{"side_stream_prefetch.garbage_collection_threshold-0.5_cap0.0375.pickle.gz", 0},
       }) {
    INFO("trace " << c.file);
    REQUIRE(stats.count(c.file) == 1);
    Trace trace = load_trace(kCases + "/" + c.file);
    CHECK(std::count_if(trace.events.begin(), trace.events.end(),
                        [](const Event& e) { return e.kind == EventKind::EmptyCache; }) == c.empty_caches);
    CHECK(std::none_of(trace.meta.pools.begin(), trace.meta.pools.end(),
                       [](const PoolInfo& p) { return p.inferred(); }));  // no pool invented to absorb it
    FidelityOptions options;
    options.capacity = capacity_for(trace, std::nullopt);
    FidelityResult r = check_fidelity(trace, options);
    INFO("divergence at event " << r.event_index << ": " << r.what);
    CHECK(r.exact);
    CHECK(r.recorded_peak == stats[c.file]["stats"]["reserved_bytes.all.peak"].get<uint64_t>());
  }
  // Both at once: the collector under a fraction of 0.27 and the program's empty_cache() every third step.
  // One reading serves all of a trace's marked runs; here the one the model reproduces.
  const char* mixed = "bert_varlen_train.garbage_collection_threshold-0.6_cap0.27_empty3.pickle.gz";
  REQUIRE(stats.count(mixed) == 1);
  Trace trace = load_trace(kCases + "/" + mixed);
  FidelityOptions options;
  options.capacity = capacity_for(trace, std::nullopt);
  CHECK(options.capacity == std::optional<uint64_t>(stats[mixed]["capacity_bytes"].get<uint64_t>()));
  CHECK(check_fidelity(trace, options).exact);
}

// Models and settings recorded after the model was built (tests/data/snapshots/SOURCE.md, group
// `workloads`): a convolutional network in channels-last with cuDNN's workspaces, gradient
// checkpointing, the garbage collector and max_split_size under a memory fraction, per-size-range
// roundup_power2_divisions, wrapped rings and late starts on them.
TEST_CASE("snapshot cases: ResNet-50 and a checkpointed Llama under other settings replay exactly",
          "[snapshot_cases]") {
  auto stats = case_stats();
  for (const char* file :
       {"resnet50_train.default.pickle.gz", "resnet50_train.expandable_late3.pickle.gz",
        "resnet50_train.garbage_collection_threshold-0.8_max_split_size_mb-128_cap0.15.pickle.gz",
        "llama_train_ckpt.default_ring30000.pickle.gz", "llama_train_ckpt.expandable_cap0.2_ring20000.pickle.gz",
        "llama_train_ckpt.max_split_size_mb-64_roundup_power2_divisions-256-1_512-2_1024-4_gt-8_late1.pickle.gz",
        "bert_varlen_train.max_split_size_mb-128_max_non_split_rounding_mb-512_late1.pickle.gz",
        "bert_varlen_oom.expandable_segments-True_garbage_collection_threshold-0.7_cap0.2.pickle.gz",
        "gpt2_oom_backoff.garbage_collection_threshold-0.5_max_split_size_mb-64_cap0.12_late1.pickle.gz",
        "resnet50_train.roundup_power2_divisions-64-8_256-4_gt-1_ring20000.pickle.gz",
        "compile_dynamic.default.pickle.gz", "compile_dynamic.default_late2.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
  }
}

// Private pools whose segments were made before the history began (tests/data/snapshots/SOURCE.md,
// group `lateprivate`). In mempool_kept.expandable_late1 the MemPool's large and small ranges are in
// the state at the first entry, each in a reservation of its own, and the pool is gone by the end, so
// no segment names it: the reconstruction guesses the default pools, and the model's check must move
// both ranges out (one ExpandableSegment never spans two reservations). In mempool_side.expandable_late1
// the model first reuses the MemPool's range for a default-pool request: that range, not the request's
// new one, must leave the default pools.
TEST_CASE("snapshot cases: private pools and OOMs in histories begun after them replay exactly",
          "[snapshot_cases][pools]") {
  auto stats = case_stats();
  for (const char* file : {"graph_mlp_train.default_late2.pickle.gz",
                           "graph_mlp_train.expandable_late2.pickle.gz",
                           "graph_shared_pool.default_late2.pickle.gz",
                           "compile_reduce_overhead.default_late3.pickle.gz",
                           "mempool_side.default_late1.pickle.gz",
                           "mempool_kept.expandable_late1.pickle.gz",
                           "gpt2_oom_backoff.expandable_cap0.12_late1.pickle.gz",
                           "gpt2_train.default_ring3.pickle.gz",
                           "side_stream_prefetch.default_ring5000.stacksall.pickle.gz",
                           "graphs_two_pools.default_late1.pickle.gz",
                           "graphs_two_pools.expandable_late1.pickle.gz",
                           "graphed_callables_train.expandable_late2.pickle.gz",
                           "graph_shared_pool.expandable_late2.pickle.gz",
                           "mempool_side.expandable_late1.pickle.gz",
                           "mempool_kept.default_late1.pickle.gz",
                           "graph_mlp_train.default_ring150.pickle.gz",
                           "graph_mlp_train.expandable_ring150.pickle.gz",
                           "compile_reduce_overhead.expandable_ring300.pickle.gz",
                           "side_stream_prefetch.expandable_ring700.pickle.gz",
                           "bert_varlen_oom.default_cap0.16_ring8000.pickle.gz",
                           "gpt2_oom_backoff.default_cap0.12_late2.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
  }
  Trace t = load_trace(kCases + "/mempool_kept.expandable_late1.pickle.gz");
  size_t private_ranges = 0;
  for (const RecordedSegment& s : t.meta.initial.segments) private_ranges += s.pool_id != std::array<int64_t, 2>{0, 0};
  CHECK(private_ranges == 2);
}

// One process, two GPUs (naive model parallelism, group `twogpus`): one device_traces list per GPU, each
// GPU its own allocator; every device's history replays exactly. PyTorch's counters in stats.jsonl are
// device 0's.
TEST_CASE("snapshot cases: each GPU of a two-GPU snapshot replays exactly", "[snapshot_cases]") {
  auto stats = case_stats();
  for (const char* file :
       {"two_devices.default.pickle.gz", "two_devices.expandable.pickle.gz", "two_devices.default_late2.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    for (int device : {0, 1}) {
      INFO(file << " device " << device);
      Trace trace = load_trace(kCases + "/" + file, ReadOptions{device});
      REQUIRE(trace.events.size() > 100);
      FidelityResult r = check_fidelity(trace, {});
      INFO("divergence at event " << r.event_index << ": " << r.what);
      CHECK(r.exact);
      CHECK(r.simulated_peak == r.recorded_peak);
      if (device == 0) CHECK(r.recorded_peak == stats[file]["stats"]["reserved_bytes.all.peak"].get<uint64_t>());
    }
  }
}

// DistributedDataParallel on two GPUs (group `ranks`): each rank's snapshot holds its own GPU's history,
// so rank 1's has an empty list for device 0. Read as device 0 it is refused, naming the device that
// has data, rather than shown as an empty trace; read with no device named (kAnyDevice, what the CLI
// and the GUI ask for by default) it is device 1; it replays exactly. FSDP2's
// ranks likewise, with its all-gather and reduce-scatter streams. (They sit in ranks/, apart from the
// snapshots the other tests read as device 0.)
TEST_CASE("snapshot cases: each DDP and FSDP rank's snapshot replays exactly on its own GPU", "[snapshot_cases]") {
  auto stats = case_stats();
  for (const char* file : {"ddp_train.default_rank0.pickle.gz", "ddp_train.default_rank1.pickle.gz",
                           "ddp_train.expandable_rank0.pickle.gz", "ddp_train.expandable_rank1.pickle.gz",
                           "ddp_train.default_rank0_late2.pickle.gz", "ddp_train.default_rank1_late2.pickle.gz",
                           "fsdp_train.default_rank0.pickle.gz", "fsdp_train.default_rank1.pickle.gz",
                           "fsdp_train.expandable_rank0.pickle.gz", "fsdp_train.expandable_rank1.pickle.gz"}) {
    INFO(file);
    REQUIRE(stats.count(file) == 1);
    const int device = std::string(file).find("rank1") != std::string::npos ? 1 : 0;
    Trace trace = load_trace(kCases + "/ranks/" + file, ReadOptions{device});
    FidelityResult r = check_fidelity(trace, {});
    INFO("divergence at event " << r.event_index << ": " << r.what);
    CHECK(r.exact);
    CHECK(r.simulated_peak == r.recorded_peak);
    CHECK(r.recorded_peak == stats[file]["stats"]["reserved_bytes.all.peak"].get<uint64_t>());
    // Named by no one, the device with data is read: rank 1's snapshot is GPU 1's history.
    Trace any = load_trace(kCases + "/ranks/" + file, ReadOptions{kAnyDevice});
    CHECK(any.events == trace.events);
    CHECK(any.meta.device == device);
    if (device == 1) {
      try {
        load_trace(kCases + "/ranks/" + file);
        FAIL("device 0 of a rank-1 snapshot read as an empty trace");
      } catch (const FormatError& e) {
        CHECK_THAT(e.what(), Catch::Contains("devices with data: 1 ("));
      }
    }
  }
}

TEST_CASE("snapshot cases: a snapshot without history is a state", "[snapshot_cases]") {
  auto stats = case_stats();
  for (std::string base : {"gpt2_train.default_nohistory", "side_stream_prefetch.expandable_nohistory"}) {
    INFO(base);
    const auto& st = stats[base + ".pickle.gz"];
    Trace dict = load_trace(kCases + "/" + base + ".pickle.gz");
    Trace list = load_trace(kCases + "/" + base + ".segments.pickle.gz");  // torch.cuda.memory_snapshot()
    CHECK(dict.meta.history_absent);
    CHECK(list.meta.history_absent);
    CHECK(dict.meta.initial.reserved() == st["stats"]["reserved_bytes.all.current"].get<uint64_t>());
    CHECK(list.meta.initial == dict.meta.initial);
    CHECK(dict.events.size() == dict.meta.initial.live_blocks);
    uint64_t requested = 0;
    for (const Event& e : dict.events) requested += e.size;
    CHECK(requested == st["stats"]["requested_bytes.all.current"].get<uint64_t>());
  }
}

// ---- reconstruction rules, one by one -------------------------------------------------------

namespace {
constexpr uint64_t MiB = 1ull << 20;
Event entry(EventKind k, Addr a, uint64_t size, StreamIndex stream = 0) {
  Event e;
  e.kind = k;
  e.addr = a;
  e.size = size;
  e.stream = stream;
  return e;
}
RecordedSegment segment(Addr a, uint64_t size, bool expandable = false) {
  RecordedSegment s;
  s.address = a;
  s.total_size = size;
  s.is_expandable = expandable;
  return s;
}
}  // namespace

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

TEST_CASE("initial state: blocks live at the end that the history never mentions were live all along",
          "[snapshot_cases]") {
  Addr s = 0x500000000;
  RecordedSegment seg = segment(s, 2 * MiB);
  seg.small_pool = true;
  RecordedBlock ghost;
  ghost.address = s + 512;
  ghost.size = 1024;
  ghost.requested_size = 1000;
  ghost.state = RecordedBlock::State::ActiveAllocated;
  RecordedBlock later = ghost;
  later.address = s + 4096;
  seg.blocks = {ghost, later};
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

TEST_CASE("snapshot cases: the PyTorch 2.0 layout reads as the same trace, without times", "[snapshot_cases]") {
  // tests/tools/to_pytorch20.py rewrote the late-start recording as PyTorch 2.0 wrote snapshots: blocks
  // without 'address' (they tile the segment) or 'requested_size' (in 'history'), no 'time_us', protocol 2.
  Trace now = load_trace(kCases + "/gpt2_train.default_late2.pickle.gz");
  Trace old = load_trace(kCases + "/gpt2_train.default_late2.torch20.pickle.gz");
  CHECK_FALSE(old.meta.has_times);
  CHECK(now.meta.has_times);
  REQUIRE(old.events.size() == now.events.size());
  for (size_t i = 0; i < now.events.size(); ++i) {
    Event a = now.events[i], b = old.events[i];
    a.time_us = b.time_us = 0;
    REQUIRE(a == b);
  }
  CHECK(old.meta.initial == now.meta.initial);
  FidelityResult r = check_fidelity(old, FidelityOptions{});
  CHECK(r.exact);
  CHECK(r.recorded_peak == 15286140928ull);
}

TEST_CASE("pytorch: a request larger than an expandable segment's range is out of memory, not a crash",
          "[snapshot_cases]") {
  // One 128 GiB tensor, as on a 141 GB H200: past 1 1/8 of the default 80 GB card's memory.
  Trace t;
  Event a;
  a.kind = EventKind::Alloc;
  a.size = 128ull << 30;
  t.events.push_back(a);
  MemorySource source(t);
  ReplayOptions options;
  options.on_oom = OnOom::Skip;
  ReplayResult r =
      replay_simulated(source, PolicySpec::parse("pytorch:expandable_segments:True"), SimDeviceConfig{}, options);
  CHECK(r.ooms.size() == 1);
  CHECK(r.final_reserved == 0);
  // With the H200's memory as the capacity, the segment's range is sized from it and the request fits.
  MemorySource again(t);
  SimDeviceConfig h200;
  h200.capacity = 141ull * 1000 * 1000 * 1000;
  ReplayResult fits = replay_simulated(again, PolicySpec::parse("pytorch:expandable_segments:True"), h200, options);
  CHECK(fits.ooms.empty());
  CHECK(fits.reserved.bytes >= a.size);
}

// ---- private pools: CUDA graph capture, torch.compile reduce-overhead, torch.cuda.MemPool ----

namespace {

size_t count_kind(const Trace& t, EventKind kind) {
  return static_cast<size_t>(
      std::count_if(t.events.begin(), t.events.end(), [&](const Event& e) { return e.kind == kind; }));
}

bool has_pool(const Trace& t, std::array<int64_t, 2> id) {
  return std::any_of(t.meta.pools.begin(), t.meta.pools.end(), [&](const PoolInfo& p) { return p.id == id; });
}

}  // namespace

TEST_CASE("snapshot cases: CUDA graphs, torch.compile and MemPools replay exactly with their private pools",
          "[snapshot_cases][pools]") {
  auto stats = case_stats();
  for (const char* file : {"graph_mlp_train.default.pickle.gz", "graph_mlp_train.expandable.pickle.gz",
                           "compile_reduce_overhead.default.pickle.gz", "mempool_side.default.pickle.gz",
                           "mempool_side.expandable.pickle.gz", "graph_shared_pool.default.pickle.gz",
                           "graph_shared_pool.expandable.pickle.gz", "graphs_two_pools.default.pickle.gz",
                           "graphs_two_pools.expandable.pickle.gz", "graphed_callables_train.default.pickle.gz",
                           "graphed_callables_train.expandable.pickle.gz", "mempool_kept.default.pickle.gz",
                           "mempool_kept.expandable.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
  }
}

// torch.compile(mode="reduce-overhead") training (group `graphtrees`): CUDA graph trees record forward and
// backward graphs per shape in one private pool, evaluation forwards between steps and a graph output kept
// across steps start other paths of the tree; from the start, expandable, begun late, a 400-entry ring.
TEST_CASE("snapshot cases: torch.compile reduce-overhead training replays exactly", "[snapshot_cases][pools]") {
  auto stats = case_stats();
  for (const char* file :
       {"compile_graph_trees_train.default.pickle.gz", "compile_graph_trees_train.expandable.pickle.gz",
        "compile_graph_trees_train.default_late3.pickle.gz", "compile_graph_trees_train.expandable_late4.pickle.gz",
        "compile_graph_trees_train.default_ring400.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
  }
}

TEST_CASE("pool inference: graph captures go to the capture's pool, which is released before the last empty_cache",
          "[snapshot_cases][pools]") {
  Trace t = load_trace(kCases + "/graph_mlp_train.default.pickle.gz");
  REQUIRE(has_pool(t, {1, 0}));
  // 28 allocations on the capture stream; all but the generator's two 8-byte seed/offset tensors, made
  // before the capture began, went to the graph's pool.
  size_t in_pool = 0, small_default_on_capture_stream = 0;
  for (const Event& e : t.events) {
    if (e.kind != EventKind::Alloc || t.meta.streams[e.stream] != 1014704544) continue;
    if (e.pool)
      ++in_pool;
    else if (e.size == 8)
      ++small_default_on_capture_stream;
  }
  CHECK(in_pool == 26);
  CHECK(small_default_on_capture_stream == 2);
  CHECK(count_kind(t, EventKind::PoolRelease) == 1);  // `del g`: releasePool before the final empty_cache
  // torch.cuda.graph() empties the cache before capturing, though a new segment follows.
  CHECK(count_kind(t, EventKind::EmptyCache) == 2);
}

TEST_CASE("pool inference: a MemPool alive across empty_cache keeps its segments, so the model tells it apart",
          "[snapshot_cases][pools]") {
  Trace t = load_trace(kCases + "/mempool_kept.default.pickle.gz");
  CHECK(t.meta.pools.size() >= 2);  // nothing in the snapshot names it: the empty_cache that kept its segments does
  CHECK(std::any_of(t.events.begin(), t.events.end(),
                    [](const Event& e) { return e.kind == EventKind::Alloc && e.pool; }));
}

TEST_CASE("pool inference: a MemPool on the default stream is told apart by the model", "[snapshot_cases][pools]") {
  Trace t = load_trace(kCases + "/mempool_side.default.pickle.gz");
  CHECK(t.meta.pools.size() >= 2);  // the segments are all gone by the end: inferred pools, id (-1, k)
  CHECK(count_kind(t, EventKind::PoolRelease) >= 1);
  CHECK(std::any_of(t.events.begin(), t.events.end(),
                    [](const Event& e) { return e.kind == EventKind::Alloc && e.pool; }));
}

// ---- MemPool(allocator=...), MemPool(use_on_oom=True), MemPool(no_split=True) (group mempoolvariants) ----

namespace {

const char* const kMempoolVariants[] = {
    "mempool_allocator.default.pickle.gz",
    "mempool_allocator.expandable.pickle.gz",
    "mempool_allocator.expandable_late1.pickle.gz",
    "mempool_allocator.expandable_keptpools.pickle.gz",
    "mempool_no_split.default.pickle.gz",
    "mempool_no_split.expandable.pickle.gz",
    "mempool_no_split.default_late1.pickle.gz",
    "mempool_no_split.default_keptpools.pickle.gz",
    "mempool_no_split.expandable_keptpools.pickle.gz",
    "mempool_oom_fallback.default_cap0.02.pickle.gz",
    "mempool_oom_fallback.expandable_cap0.02.pickle.gz",
    "mempool_oom_fallback.expandable_cap0.02_poolalloc.pickle.gz",
    "mempool_oom_fallback.default_cap0.02_late1.pickle.gz",
    "mempool_oom_fallback.garbage_collection_threshold-0.6_cap0.02.pickle.gz",
    "mempool_oom_fallback.default_left1.6.pickle.gz",
    "mempool_oom_fallback.default_cap0.02_poolalloc_keptpools.pickle.gz",
    "mempool_oom_fallback.expandable_cap0.02_poolalloc_keptpools_ring60.pickle.gz",
};

// The pools whose MemPool the history shows made with `trait`.
size_t pools_with(const Trace& t, bool PoolInfo::*trait) {
  return static_cast<size_t>(
      std::count_if(t.meta.pools.begin(), t.meta.pools.end(), [&](const PoolInfo& p) { return p.*trait; }));
}

}  // namespace

TEST_CASE("snapshot cases: MemPools with an allocator, use_on_oom or no_split replay exactly",
          "[snapshot_cases][pools][mempool]") {
  auto stats = case_stats();
  for (const char* file : kMempoolVariants) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
    // Plain replay (the model's own addresses, the capacity inferred) reaches the same peak.
    Trace t = load_trace(kCases + "/" + file);
    MemorySource src(t);
    SimDeviceConfig config;
    config.capacity = stats[file]["capacity_bytes"].is_number()
                          ? std::optional<uint64_t>(stats[file]["capacity_bytes"].get<uint64_t>())
                          : capacity_for(t, std::nullopt);
    ReplayResult r = replay_simulated(src, PolicySpec::parse("pytorch"), config, ReplayOptions{}, &t.events);
    INFO("trace " << file);
    CHECK(r.reserved.bytes == recorded_peak(t));
  }
}

TEST_CASE("pool inference: a MemPool with its own allocator under expandable segments",
          "[snapshot_cases][pools][mempool]") {
  // Its segments are cudaMalloc-style (segment_alloc) while the default pools map pages.
  Trace gone = load_trace(kCases + "/mempool_allocator.expandable.pickle.gz");
  CHECK(pools_with(gone, &PoolInfo::own_allocator) == 1);  // both MemPools' segments are gone: one inferred pool
  Trace kept = load_trace(kCases + "/mempool_allocator.expandable_keptpools.pickle.gz");
  CHECK(pools_with(kept, &PoolInfo::own_allocator) == 2);  // (0, 1) and (0, 2), named by the final segments
  CHECK(has_pool(kept, {0, 1}));
  CHECK(has_pool(kept, {0, 2}));
  // Without expandable segments nothing tells a MemPool's allocator from cudaMalloc.
  Trace plain = load_trace(kCases + "/mempool_allocator.default.pickle.gz");
  CHECK(pools_with(plain, &PoolInfo::own_allocator) == 0);
}

TEST_CASE("pool inference: a no_split MemPool", "[snapshot_cases][pools][mempool]") {
  for (const char* file : {"mempool_no_split.default.pickle.gz", "mempool_no_split.expandable.pickle.gz",
                           "mempool_no_split.default_late1.pickle.gz", "mempool_no_split.default_keptpools.pickle.gz",
                           "mempool_no_split.expandable_keptpools.pickle.gz"}) {
    INFO("trace " << file);
    Trace t = load_trace(kCases + "/" + file);
    CHECK(pools_with(t, &PoolInfo::no_split) == 1);
  }
  Trace kept = load_trace(kCases + "/mempool_no_split.default_keptpools.pickle.gz");
  CHECK(kept.meta.pools[1].id == std::array<int64_t, 2>{0, 1});
  CHECK(kept.meta.pools[1].no_split);
}

TEST_CASE("pool inference: requests a use_on_oom MemPool served at the limit are the default pools'",
          "[snapshot_cases][pools][mempool]") {
  // 17 requests of 64 MiB got segments up to the memory fraction; the next 7 took the overflow pool's
  // cached blocks (try_mempool_fallback) and the 8th ran out. The pool's own requests are the 3 made
  // inside use_mem_pool.
  for (const char* file : {"mempool_oom_fallback.default_cap0.02.pickle.gz",
                           "mempool_oom_fallback.garbage_collection_threshold-0.6_cap0.02.pickle.gz",
                           "mempool_oom_fallback.expandable_cap0.02_poolalloc.pickle.gz",
                           "mempool_oom_fallback.default_cap0.02_poolalloc_keptpools.pickle.gz"}) {
    INFO("trace " << file);
    Trace t = load_trace(kCases + "/" + file);
    REQUIRE(pools_with(t, &PoolInfo::use_on_oom) == 1);
    size_t in_pool = 0;
    for (const Event& e : t.events) in_pool += e.kind == EventKind::Alloc && e.pool != 0;
    CHECK(in_pool == 3);
  }
  // Under expandable segments a plain MemPool's blocks are expandable, which the fallback skips: nothing
  // fell back, so nothing says the pool opted in.
  Trace expandable = load_trace(kCases + "/mempool_oom_fallback.expandable_cap0.02.pickle.gz");
  CHECK(pools_with(expandable, &PoolInfo::use_on_oom) == 0);
}

TEST_CASE("pool inference: a deleted MemPool empties its own pool, not the default pools",
          "[snapshot_cases][pools][mempool]") {
  // `del pool` with no empty_cache() after it: ~MemPool's emptyCache(id) released the pool's segments
  // alone while the default pools kept their cached 40 MiB.
  Trace t = load_trace(kCases + "/mempool_allocator.expandable.pickle.gz");
  CHECK(pools_with(t, &PoolInfo::empties_on_release) >= 1);
  size_t first_release = 0;
  while (first_release < t.events.size() && t.events[first_release].kind != EventKind::SegmentFree) ++first_release;
  REQUIRE(first_release < t.events.size());
  REQUIRE(first_release > 0);
  const Event& before = t.events[first_release - 1];
  CHECK(before.kind == EventKind::PoolRelease);
  CHECK(t.meta.pools[before.pool].empties_on_release);
}

TEST_CASE("pools: other policies keep pools apart unless asked to merge them", "[snapshot_cases][pools]") {
  Trace t = load_trace(kCases + "/graph_mlp_train.default.pickle.gz");
  auto run = [&](const std::string& policy) {
    MemorySource src(t);
    ReplayOptions options;
    options.check_invariants = true;
    return replay_simulated(src, PolicySpec::parse(policy), SimDeviceConfig{}, options, &t.events);
  };
  ReplayResult separate = run("bestfit"), merged = run("bestfit:pools=merge");
  CHECK(separate.ooms.empty());
  CHECK(merged.ooms.empty());
  // Separate pools cannot share cached memory: never less reserved at the peak than one pool for all.
  CHECK(separate.reserved.bytes >= merged.reserved.bytes);
  CHECK(separate.reserved.bytes != merged.reserved.bytes);
  CHECK_THROWS_AS(run("bestfit:pools=shared"), PolicyConfigError);
  // The pytorch model routes pools itself; merging them is a what-if that changes its answer.
  CHECK(run("pytorch").reserved.bytes == 1354760192);
  CHECK(run("pytorch:pools=merge").reserved.bytes != 1354760192);
}

TEST_CASE("pools: the native and JSON Lines formats keep every event's pool", "[snapshot_cases][pools]") {
  for (const char* file :
       {"mempool_side.expandable.pickle.gz", "mempool_oom_fallback.expandable_cap0.02_poolalloc.pickle.gz"})
    for (const char* ext : {".fltrace", ".jsonl"}) {
      Trace t = load_trace(kCases + "/" + file);
      REQUIRE(t.meta.pools.size() > 1);
      std::string path =
          (std::filesystem::temp_directory_path() / ("fraglab_pools_" + std::to_string(::getpid()) + ext)).string();
      save_trace(t, path);
      Trace back = load_trace(path);
      CHECK(back.meta.pools == t.meta.pools);
      REQUIRE(back.events.size() == t.events.size());
      for (size_t i = 0; i < t.events.size(); ++i) {
        INFO(ext << " event " << i);
        CHECK(back.events[i].pool == t.events[i].pool);
        CHECK(back.events[i].kind == t.events[i].kind);
      }
      std::filesystem::remove(path);
    }
}

TEST_CASE("pool inference: more private pools than an event can name is an error, not a wrap",
          "[snapshot_cases][pools]") {
  Trace t;
  t.meta.source = "hostile.pickle";
  for (int64_t k = 0; k < 70000; ++k) {
    RecordedSegment s;
    s.address = static_cast<Addr>(k) << 21;
    s.total_size = 2 << 20;
    s.pool_id = {0, k + 1};
    t.meta.segments.push_back(s);
  }
  CHECK_THROWS_WITH(infer_pools(t, pytorch_snapshot_model()),
                    Catch::Contains("hostile.pickle") && Catch::Contains("65,535"));
}

TEST_CASE("diagnose: free memory at the peak is split by private pool", "[snapshot_cases][pools]") {
  Trace t = load_trace(kCases + "/graph_mlp_train.default.pickle.gz");
  DiagnoseOptions o;
  o.search = false;
  DiagnoseReport r = diagnose(t, "graph_mlp_train", std::nullopt, o);
  REQUIRE(r.ooms.size() == 1);  // the peak
  uint64_t graph_pool = 0, all = 0;
  for (const ByteShare& s : r.ooms[0].free_by_pool) {
    all += s.bytes;
    if (s.key.rfind("(1, 0) ", 0) == 0) graph_pool += s.bytes;
  }
  CHECK(graph_pool > 0);
  CHECK(graph_pool < all);  // and some in the default pools
}

// What users bring beyond the groups above (groups probe_* of scripts/record_snapshot_cases.sh, recorded on
// an H100 2026-11-26): HuggingFace generate() with a growing KV cache (a wrapped ring) and with a static cache
// that transformers compiles into CUDA graphs; fp16 training with gradient accumulation, a copy stream from
// pinned memory and a loss stream (record_stream on both); checkpointing with save_on_cpu offloading and
// causal SDPA on odd lengths; five streams with caching_allocator_alloc/delete, empty_strided and a second
// thread, and OOMs on every stream under max_split_size; a CUDA graph captured on a side stream while eager
// work runs on two others (its frees deferred until the capture ends); a prefetcher under a fraction whose
// OOM recoveries complete record_stream'd frees (synchronize_and_free_events); a transformer with the memory
// fraction lowered mid-run (its retries read as the program's empty_cache(), which is what they did) or the
// collector's fraction changed after the collector ran. Each replays call for call under fidelity, and plain
// replay (the simulated driver's addresses, the capacity inferred) reaches PyTorch's reserved peak.
TEST_CASE("snapshot cases: generate, mixed precision with streams, offloading, side-stream capture replay exactly",
          "[snapshot_cases][pools]") {
  check_cases({"llama_generate.default_ring3000.pickle.gz",
               "llama_generate_static.default.pickle.gz",
               "llama_generate_static.default_late1.pickle.gz",
               "llama_generate_static.expandable.pickle.gz",
               "amp_accum_prefetch.default.pickle.gz",
               "amp_accum_prefetch.default_ring2000.pickle.gz",
               "amp_accum_prefetch.expandable_late2.pickle.gz",
               "ckpt_offload_sdpa.default.pickle.gz",
               "ckpt_offload_sdpa.expandable.pickle.gz",
               "ckpt_offload_sdpa.max_split_size_mb-128_ring5000.pickle.gz",
               "many_streams_raw.default.pickle.gz",
               "many_streams_raw.expandable.pickle.gz",
               "many_streams_raw.expandable_late3.pickle.gz",
               "many_streams_raw.max_split_size_mb-256_cap0.1.pickle.gz",
               "graph_side_capture.default.pickle.gz",
               "graph_side_capture.expandable.pickle.gz",
               "graph_side_capture.default_late1.pickle.gz",
               "graph_side_capture.default_ring200.pickle.gz",
               "prefetch_pressure.default_cap0.05.pickle.gz",
               "prefetch_pressure.expandable_cap0.04.pickle.gz",
               "varlen_transformer_train.default.pickle.gz",
               "varlen_transformer_train.expandable_cap0.1.pickle.gz",
               "varlen_transformer_train.expandable_cap0.07.pickle.gz",
               "varlen_transformer_train.default_cap0.1_frac3-0.06_frac6-0.1.pickle.gz",
               "varlen_transformer_train.default_cap0.12_frac3-0.05.pickle.gz",
               "varlen_transformer_train.garbage_collection_threshold-0.6_cap0.12_frac4-0.07.pickle.gz"});
}

// A CUDA graph captured on a side stream while an eager stream's request needs a new segment past a memory
// fraction: malloc skips release_cached_blocks while any capture is underway (captures_underway is not
// empty), so PyTorch ran out of memory though a cached 2 GiB segment on another stream could have made room;
// the same request after the capture succeeded with one retry. The capture's end is not in the trace: the OOM
// lies after the capture stream's last request to the graph's pool, read as inside it (the graph, kept to
// the snapshot, names its pool). The model released the cache and served it.
TEST_CASE("snapshot cases: a request during another stream's capture skips release_cached_blocks",
          "[snapshot_cases][pools]") {
  auto stats = case_stats();
  for (const char* file : {"graph_side_capture.default_cap0.1_keptgraph.pickle.gz",
                           "graph_side_capture.expandable_cap0.1_keptgraph.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    REQUIRE(stats[file]["in_capture"] == "oom");
    REQUIRE(stats[file]["after_capture"] == "ok");
    check_exact(file, stats[file]);
  }
}

// Graphs kept alive to the end and a recorded OOM long after their capture: the capture ended before the
// default stream's next request, so malloc ran release_cached_blocks for the OOM'd request (its releases
// precede the `oom` entry). Read as a capture left open to the end, the model skipped them: make_graphed_callables
// with AMP under a fraction diverged at entry 1386 (1362 in its ring), a live graph and MemPool with expandable
// segments at 1258.
TEST_CASE("snapshot cases: a recorded OOM after a live graph's capture ended releases the cache",
          "[snapshot_cases][pools]") {
  auto stats = case_stats();
  for (const char* file :
       {"graphed_amp_train.default_cap0.05.pickle.gz", "graphed_amp_train.default_cap0.05_ring1500.pickle.gz",
        "graphed_amp_train.expandable_cap0.05.pickle.gz", "observer_oom_pools.expandable_cap0.07.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    REQUIRE(stats[file]["trace_ooms"] == 1);
    check_exact(file, stats[file]);
  }
}

// Expandable segments under a memory fraction map past it: alloc_block checks the fraction against the
// request's allocation size only, and map_block then maps whole 20 MiB pages. PyTorch's reserved bytes end
// above the limit (4259315712 > 0.05 x 85017493504, 5958008832 > 0.07 x it); the simulated device refused
// those maps, and the model unmapped or ran out of memory where the recording did not.
TEST_CASE("snapshot cases: expandable segments map past a memory fraction, as PyTorch does", "[snapshot_cases]") {
  auto stats = case_stats();
  for (const char* file :
       {"prefetch_pressure.expandable_cap0.05.pickle.gz", "prefetch_pressure.expandable_cap0.07.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
    Trace trace = load_trace(kCases + "/" + file);
    const uint64_t limit = stats[file]["capacity_bytes"].get<uint64_t>();
    CHECK(recorded_peak(trace) > limit);
    CHECK(plain_replay_peak(trace, limit) == recorded_peak(trace));
  }
}

// Group probe2_* (recorded on an H100 2026-11-26): a CUDA graph captured into a user MemPool, two MemPools
// nested and used from a second thread (kept to the snapshot, or expandable), an OOM observer's run with a
// graph and a MemPool, torch.compile(mode="max-autotune"), make_graphed_callables with AMP, a world-size-1
// NCCL group all-reducing gradient buckets (under a fraction with an OOM), expandable segments with the
// collector, rounding or max_split_size at OOMs under a fraction.
TEST_CASE("snapshot cases: probe2 pools, max-autotune, NCCL buckets, expandable settings at OOMs replay exactly",
          "[snapshot_cases][pools]") {
  auto stats = case_stats();
  for (const char* file :
       {"compile_max_autotune.default.pickle.gz", "compile_max_autotune.expandable.pickle.gz",
        "mempool_graph_capture.default.pickle.gz", "mempool_graph_capture.default_late1.pickle.gz",
        "mempool_graph_capture.default_ring200.pickle.gz", "mempool_graph_capture.expandable.pickle.gz",
        "mempool_graph_capture.expandable_keptpools.pickle.gz", "mempool_nested_threads.default_keptpools.pickle.gz",
        "mempool_nested_threads.expandable.pickle.gz", "observer_oom_pools.default_cap0.07.pickle.gz",
        "gpt2_oom_backoff.expandable_segments-True_garbage_collection_threshold-0.6_cap0.12.pickle.gz",
        "gpt2_oom_backoff.expandable_segments-True_max_split_size_mb-64_cap0.12_late1.pickle.gz",
        "gpt2_oom_backoff.expandable_segments-True_roundup_power2_divisions-4_cap0.12.pickle.gz",
        "nccl_bucketed.default.pickle.gz", "nccl_bucketed.default_cap0.08.pickle.gz",
        "nccl_bucketed.default_cap0.08_late2.pickle.gz", "nccl_bucketed.expandable.pickle.gz",
        "nccl_bucketed.expandable_cap0.08.pickle.gz", "graphed_amp_train.default.pickle.gz"}) {
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
    Trace trace = load_trace(kCases + "/" + file);
    CHECK(plain_replay_peak(trace, capacity_for(trace, std::nullopt)) == recorded_peak(trace));
  }
}

// Expandable segments turned off and on by the program (torch.cuda.memory._set_allocator_settings: vLLM's
// sleep-mode pools, NeMo's dataloader, a program sharing tensors over IPC). The snapshot records only the
// last setting; the device calls show the others (a mapping only with it on, a cudaMalloc for a pool
// without an allocator of its own only with it off). Replayed under the last setting from the first entry,
// 7 of these 13 diverged (at the first entry for those that began under the other one).
TEST_CASE("snapshot cases: expandable segments turned off and on mid-run replay exactly",
          "[snapshot_cases][settings]") {
  check_cases({"sleep_mode_pools.expandable.pickle.gz", "sleep_mode_pools.expandable_plainpool.pickle.gz",
               "sleep_mode_pools.expandable_defaultinwindow.pickle.gz", "sleep_mode_pools.expandable_late1.pickle.gz",
               "sleep_mode_pools.expandable_keptpools.pickle.gz",
               "sleep_mode_pools.expandable_plainpool_defaultinwindow_ring400.pickle.gz",
               "varlen_transformer_train.default_set3-exp.pickle.gz",
               "varlen_transformer_train.expandable_set2-noexp_set5-exp.pickle.gz",
               "varlen_transformer_train.expandable_set3-noexp.pickle.gz",
               "varlen_transformer_train.default_late2_set1-exp.pickle.gz",
               "varlen_transformer_train.expandable_ring4000_set2-noexp_set5-exp.pickle.gz",
               "varlen_transformer_train.default_cap0.08_set3-exp.pickle.gz",
               "varlen_transformer_train.expandable_cap0.08_set2-noexp_set6-exp.pickle.gz"});
  // Turned on after step 3 and no mapping made after: the whole history ran with it off.
  Trace on_late = load_trace(kCases + "/varlen_transformer_train.default_set3-exp.pickle.gz");
  CHECK(on_late.meta.expandable_flipped == std::vector<std::pair<uint64_t, uint64_t>>{{0, UINT64_MAX}});
  // Off after step 2, on after step 5: off from its first cudaMalloc; no mapping after it, and the model
  // replays the rest alike either way, so the window runs to the end.
  Trace toggled = load_trace(kCases + "/varlen_transformer_train.expandable_set2-noexp_set5-exp.pickle.gz");
  REQUIRE(toggled.meta.expandable_flipped.size() == 1);
  CHECK(toggled.meta.expandable_flipped[0].first > 0);
  // Off after step 2, on after step 6, OOMs under fraction 0.08: a small request the setting on served
  // from an expandable page (off, the model made a cudaMalloc) moved the change back inside the history.
  Trace oomed = load_trace(kCases + "/varlen_transformer_train.expandable_cap0.08_set2-noexp_set6-exp.pickle.gz");
  REQUIRE(oomed.meta.expandable_flipped.size() == 1);
  CHECK(oomed.meta.expandable_flipped[0].first > 0);
  CHECK(oomed.meta.expandable_flipped[0].second < UINT64_MAX);
  // A what-if names the setting: the program's changes are not replayed then.
  FidelityOptions what_if;
  what_if.policy = "pytorch:expandable_segments=True";
  const FidelityResult r = check_fidelity(on_late, what_if);
  CHECK_FALSE(r.exact);
  CHECK(r.event_index == 0);
  // A snapshot without recorded settings (written before PyTorch recorded them, or stripped) from a run with
  // expandable segments: the mappings say so. Replayed with PyTorch's default, these diverged at entry 0.
  const std::initializer_list<const char*> no_settings = {"graph_mlp_train.expandable_nosettings.pickle.gz",
                                                          "mempool_side.expandable_nosettings.pickle.gz",
                                                          "side_stream_prefetch.expandable_nosettings.pickle.gz"};
  check_cases(no_settings);
  for (const char* file : no_settings) {
    Trace trace = load_trace(kCases + "/" + file);
    CHECK(trace.meta.allocator_settings.empty());
    CHECK(trace.meta.expandable_flipped == std::vector<std::pair<uint64_t, uint64_t>>{{0, UINT64_MAX}});
  }
  // A MemPool with an allocator of its own under the setting is not read as the setting turned off.
  Trace own = load_trace(kCases + "/mempool_allocator.expandable.pickle.gz");
  CHECK(own.meta.expandable_flipped.empty());
  CHECK(std::any_of(own.meta.pools.begin(), own.meta.pools.end(), [](const PoolInfo& p) { return p.own_allocator; }));
}

// The windows from the device calls alone (no model installed to revise them).
// Snapshots that record no settings (PyTorch 2.0's) from jobs run with max_split_size_mb, rounding or the
// collector: under PyTorch's defaults these diverged (at entries 1933, 2, 2023 and 15561); the importer
// reads the settings from how the recording allocator behaved (traces/formats/pytorch/unrecorded_settings.h). The first
// needs two together (neither alone moves the model further).
TEST_CASE("snapshot cases: settings a snapshot does not record are read from the recording",
          "[snapshot_cases][settings]") {
  const std::pair<const char*, const char*> cases[] = {
      {"gpt2_oom_backoff.garbage_collection_threshold-0.5_max_split_size_mb-64_cap0.12_late1_nosettings.pickle.gz",
       "max_split_size_mb:64,garbage_collection_threshold:0.5"},
      {"gpt2_oom_backoff.expandable_segments-True_roundup_power2_divisions-4_cap0.12_nosettings.pickle.gz",
       "roundup_power2_divisions:4"},
      {"resnet50_train.garbage_collection_threshold-0.6_cap0.115_nosettings.pickle.gz",
       "garbage_collection_threshold:0.6"},
      // Under the GPU's own limit (no fraction) the collector never runs: only max_split_size_mb shows.
      {"batch_search.garbage_collection_threshold-0.6_max_split_size_mb-128_left8_nosettings.pickle.gz",
       "max_split_size_mb:128"}};
  for (const auto& [file, conf] : cases) {
    INFO(file);
    check_cases({file});
    const Trace trace = load_trace(kCases + "/" + file);
    CHECK(trace.meta.settings_inferred);
    CHECK(trace.meta.allocator_settings.at("PYTORCH_CUDA_ALLOC_CONF") == conf);
  }
  // The recording with its settings is read as recorded; one that replays under the defaults infers nothing.
  const Trace recorded = load_trace(
      kCases + "/gpt2_oom_backoff.garbage_collection_threshold-0.5_max_split_size_mb-64_cap0.12_late1.pickle.gz");
  CHECK_FALSE(recorded.meta.settings_inferred);
  const Trace plain = load_trace(kCases + "/graph_mlp_train.default_nosettings.pickle.gz");
  CHECK_FALSE(plain.meta.settings_inferred);
  CHECK(plain.meta.allocator_settings.empty());
  // Kept by convert: a converted trace replays under the same settings without searching again.
  const Trace inferred = load_trace(kCases + "/" + cases[0].first);
  const std::string dir = std::filesystem::temp_directory_path() / ("fraglab_inferred_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* ext : {".fltrace", ".jsonl"}) {
    const std::string path = dir + "/t" + ext;
    save_trace(inferred, path);
    const Trace back = load_trace(path);
    CHECK(back.meta.settings_inferred);
    CHECK(back.meta.allocator_settings == inferred.meta.allocator_settings);
  }
  std::filesystem::remove_all(dir);
}

// Settings PyTorch 2.11 reads from PYTORCH_ALLOC_CONF that fraglab refused before ("Unrecognized
// CachingAllocator option"): large_segment_size_mb (the segment of a 1-10 MiB request and an expandable
// large pool's page), per_process_memory_fraction (a limit from the settings text, read from the OOMs
// like set_per_process_memory_fraction's), graph_capture_record_stream_reuse.
TEST_CASE("snapshot cases: PyTorch 2.11's newer settings replay exactly", "[snapshot_cases][settings]") {
  check_cases({"gpt2_train.large_segment_size_mb-40.pickle.gz",
               "gpt2_train.large_segment_size_mb-64_expandable_segments-True.pickle.gz",
               "gpt2_oom_backoff.large_segment_size_mb-40_cap0.12.pickle.gz",
               "gpt2_oom_backoff.per_process_memory_fraction-0.12.pickle.gz",
               "gpt2_oom_backoff.per_process_memory_fraction-0.12_expandable_segments-True_late1.pickle.gz",
               "bert_varlen_train.expandable_segments-True_large_segment_size_mb-12_ring30000.pickle.gz",
               "resnet50_train.large_segment_size_mb-32_max_split_size_mb-64.pickle.gz",
               "graph_side_capture.graph_capture_record_stream_reuse-True.pickle.gz",
               "graphed_amp_train.graph_capture_record_stream_reuse-True.pickle.gz"});
  check_cases({"mempool_side.large_segment_size_mb-40_expandable_segments-True.pickle.gz",
               "mempool_oom_fallback.large_segment_size_mb-40_cap0.02.pickle.gz",
               "graph_mlp_train.large_segment_size_mb-32.pickle.gz",
               "compile_reduce_overhead.per_process_memory_fraction-0.5.pickle.gz",
               "side_stream_prefetch.large_segment_size_mb-40_ring1000.pickle.gz",
               "many_streams_raw.large_segment_size_mb-40_cap0.1.pickle.gz",
               "observer_oom_mlp.large_segment_size_mb-40_cap0.07_atoom.pickle.gz",
               "amp_accum_prefetch.large_segment_size_mb-24_late2.pickle.gz",
               "llama_generate.large_segment_size_mb-16_ring3000.pickle.gz",
               "unet_like.roundup_power2_divisions-64-4_256-2_gt-8_cap0.1.pickle.gz",
               "gpt2_oom_backoff.large_segment_size_mb-100_expandable_segments-True_left9.6.pickle.gz"});
  // Expandable segments with large pages of 32 to 64 MiB (group probe7): mapped, unmapped by empty_cache()
  // and by malloc's recovery, under a fraction, in rings, with CUDA graphs and a MemPool's own allocator.
  check_cases({"mempool_allocator.large_segment_size_mb-40_expandable_segments-True.pickle.gz",
               "graph_mlp_train.expandable_segments-True_large_segment_size_mb-40.pickle.gz",
               "observer_oom_mlp.expandable_segments-True_large_segment_size_mb-40_cap0.07_atoom.pickle.gz",
               "infer_server.expandable_segments-True_large_segment_size_mb-40_cap0.04_ring4000.pickle.gz",
               "prefetch_pressure.expandable_segments-True_large_segment_size_mb-48_cap0.05.pickle.gz",
               "bert_varlen_oom.expandable_segments-True_large_segment_size_mb-32_cap0.16_ring8000.pickle.gz",
               "gpt2_oom_backoff.expandable_segments-True_large_segment_size_mb-64_cap0.12.pickle.gz",
               "llama_train_ckpt.expandable_segments-True_large_segment_size_mb-40_late2_empty3.pickle.gz",
               "gpt2_train.expandable_segments-True_large_segment_size_mb-40_empty2.pickle.gz"});
  // A MemPool(use_on_oom) reserve under expandable segments, all gone by the end: the first reading put
  // the reserve in the default pools and the requests in a pool of their own, and the model served the
  // recorded OOM from the reserve's cached block; such a block's segment is now moved out of the request's
  // pool (PoolMisplacement::ServedOom), and the reading is the program's (diverged at entry 46 before).
  check_cases({"mempool_oom_fallback.expandable_segments-True_large_segment_size_mb-40_cap0.02.pickle.gz"});
  const Trace fallback =
      load_trace(kCases + "/mempool_oom_fallback.expandable_segments-True_large_segment_size_mb-40_cap0.02.pickle.gz");
  REQUIRE(fallback.meta.pools.size() == 2);
  size_t in_pool = 0;
  for (const Event& e : fallback.events) in_pool += e.kind == EventKind::Alloc && e.pool == 1;
  CHECK(in_pool == 3);  // the reserve: 384 MiB, 96 MiB and 600,000 bytes
  // vLLM's sleep mode: its _set_allocator_settings replaced the text that set 40 MiB, which PyTorch keeps;
  // the cudaMallocs for 1-8 MiB requests show it (diverged at the 4th request before).
  check_cases({"sleep_mode_pools.large_segment_size_mb-40_expandable_segments-True.pickle.gz"});
  const Trace sleep =
      load_trace(kCases + "/sleep_mode_pools.large_segment_size_mb-40_expandable_segments-True.pickle.gz");
  CHECK(sleep.meta.allocator_settings.at("PYTORCH_CUDA_ALLOC_CONF") == "expandable_segments:True");
  CHECK(recorded_large_segment_size(sleep.meta) == 40ull << 20);
  // Where the text names the size, nothing is noted.
  CHECK_FALSE(load_trace(kCases + "/gpt2_train.large_segment_size_mb-40.pickle.gz")
                  .meta.allocator_settings.contains("large_segment_size"));
  // 40 MiB segments for the 1-10 MiB requests, as the recording made them.
  const Trace t = load_trace(kCases + "/gpt2_train.large_segment_size_mb-40.pickle.gz");
  CHECK(recorded_large_segment_size(t.meta) == 40ull << 20);
  bool forty = false;
  for (const Event& e : t.events) forty = forty || (e.kind == EventKind::SegmentAlloc && e.size == 40ull << 20);
  CHECK(forty);
}

TEST_CASE("settings inference: a mapping shows the setting on, a cudaMalloc off", "[settings]") {
  const SnapshotModel rules_alone;  // the device calls alone place the windows
  Trace t;
  t.meta.allocator_settings = {{"expandable_segments", "True"}};
  t.events = {entry(EventKind::SegmentMap, 0, 2 * MiB),
              entry(EventKind::Alloc, 0, 512),  // #0 on
              entry(EventKind::Free, 0, 512),
              entry(EventKind::SegmentAlloc, 0, 2 * MiB),
              entry(EventKind::Alloc, 0, 512),  // #1 off
              entry(EventKind::Alloc, 0, 512),  // #2 shows nothing
              entry(EventKind::SegmentAlloc, 0, 2 * MiB),
              entry(EventKind::Alloc, 0, 512),  // #3 off
              entry(EventKind::SegmentMap, 0, 2 * MiB),
              entry(EventKind::Alloc, 0, 512)};  // #4 on
  infer_expandable_switches(t, rules_alone);
  CHECK(t.meta.expandable_flipped == std::vector<std::pair<uint64_t, uint64_t>>{{1, 4}});
  // As event positions: from the entry after Alloc #0 to Alloc #3's.
  CHECK(flipped_event_ranges(t.events, t.meta.expandable_flipped) ==
        std::vector<std::pair<uint64_t, uint64_t>>{{2, 8}});
  // Recorded off: the mappings are the other setting; before the first call, the first call's held.
  t.meta.allocator_settings = {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64"}};
  infer_expandable_switches(t, rules_alone);
  CHECK(t.meta.expandable_flipped == std::vector<std::pair<uint64_t, uint64_t>>{{0, 1}, {4, UINT64_MAX}});
  // The same setting throughout: nothing.
  t.meta.allocator_settings = {{"expandable_segments", "True"}};
  t.events = {entry(EventKind::SegmentMap, 0, 2 * MiB), entry(EventKind::Alloc, 0, 512)};
  infer_expandable_switches(t, rules_alone);
  CHECK(t.meta.expandable_flipped.empty());
}

TEST_CASE("settings inference: the windows survive convert, and bad ones are refused", "[settings][formats]") {
  Trace trace = load_trace(kCases + "/varlen_transformer_train.expandable_set2-noexp_set5-exp.pickle.gz");
  REQUIRE_FALSE(trace.meta.expandable_flipped.empty());
  const std::string dir = std::filesystem::temp_directory_path() / ("fraglab_flips_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* ext : {".fltrace", ".jsonl"}) {
    const std::string path = dir + "/t" + ext;
    save_trace(trace, path);
    CHECK(load_trace(path).meta.expandable_flipped == trace.meta.expandable_flipped);
  }
  CHECK_THROWS_WITH(ranges_from_json(nlohmann::json::parse("[[5, 3]]")), Catch::Contains("non-empty"));
  CHECK_THROWS_WITH(ranges_from_json(nlohmann::json::parse("[[1, 4], [2, 9]]")), Catch::Contains("disjoint"));
  CHECK_THROWS_WITH(ranges_from_json(nlohmann::json::parse("[[1, -4]]")), Catch::Contains("non-negative"));
  std::filesystem::remove_all(dir);
}

// An upward batch-size search (accelerate's find_executable_batch_size) with the GPU itself running out
// (all but 8 GiB taken first), the collector and max_split_size_mb set: after the two OOMs, malloc's
// recoveries were refused a segment the limit the OOMs showed (reserved + free memory) had room for, as
// the driver's own memory grew. Under the OOMs' one limit the model made those segments (diverged at entry
// 26,813 of 27,987); the limit is now followed along the trace (detail::limit_drift). ViT-B/16 and
// the search's other readings beside it.
TEST_CASE("snapshot cases: a GPU limit that drifts, and more OOM'd searches and models replay exactly",
          "[snapshot_cases][capacity]") {
  check_cases({"batch_search.garbage_collection_threshold-0.6_max_split_size_mb-128_left8.pickle.gz",
               "batch_search.default_left8_late2.pickle.gz", "batch_search.default_cap0.1_ring3000.pickle.gz",
               "vit_train.default_cap0.06.pickle.gz", "vit_train.expandable_cap0.06.pickle.gz",
               "vit_train.default_ring5000.pickle.gz"});
  // The drift is the trace's: a recovery was refused a segment the OOMs' limit had room for by 192 KiB.
  Trace drifting =
      load_trace(kCases + "/batch_search.garbage_collection_threshold-0.6_max_split_size_mb-128_left8.pickle.gz");
  detail::PytorchAllocatorConfig config;
  config.apply_recorded(drifting.meta.allocator_settings);
  const auto steps = detail::limit_drift(drifting.events, drifting.meta.initial.reserved(), config,
                                         detail::PytorchLimit::Gpu, *capacity_for(drifting, std::nullopt));
  REQUIRE_FALSE(steps.empty());
  CHECK(std::min_element(steps.begin(), steps.end(), [](auto& a, auto& b) { return a.second < b.second; })->second <=
        -static_cast<int64_t>(192u << 10));
  // The capacity's note says so; a GPU-limit recording one limit explains says nothing of it.
  std::string note;
  capacity_for(drifting, std::nullopt, &note);
  CHECK(note.find("the GPU's free memory changed along the run") != std::string::npos);
  capacity_for(load_trace(kCases + "/gpt2_oom_backoff.default_left9.6.pickle.gz"), std::nullopt, &note);
  CHECK(note.find("the GPU ran out") != std::string::npos);
  CHECK(note.find("grew") == std::string::npos);
}

// The GPU's limit higher early in the run than at its last OOM (group probe8, Faster R-CNN with all but 6 GiB
// of the GPU taken): the first three OOMs show reserved + free = 6,331,498,496 bytes, the fourth 148.9 MB
// less, and between them the recording was granted a cudaMalloc that needed 6,320,816,128. The model capped
// the limit at the least OOM limit and was refused it (diverged at entry 2,016); the limit now follows the
// grants above it, the model checking it itself. The group's other workloads (MoE routing, sparse
// embeddings) beside it.
TEST_CASE("snapshot cases: a GPU limit higher before the driver took memory, and new workloads, replay exactly",
          "[snapshot_cases][capacity]") {
  check_cases({"detection_train.default_left6.pickle.gz", "detection_train.expandable_cap0.07.pickle.gz",
               "detection_train.garbage_collection_threshold-0.6_cap0.07_ring3000.pickle.gz",
               "detection_train.default_ring6000_late2.pickle.gz", "moe_train.default_cap0.025.pickle.gz",
               "moe_train.expandable_left2.5.pickle.gz", "moe_train.max_split_size_mb-128_ring5000.pickle.gz",
               "sparse_embedding_train.roundup_power2_divisions-256-1_512-2_gt-4_late3.pickle.gz",
               "sparse_embedding_train.expandable.pickle.gz"});
  // The GPU's limit across workloads (group probe9); the prefetcher's 27 OOMs diverged at entry 37 with the
  // limit capped at the least of them (the driver took ~132 MB after its first segments).
  check_cases({"prefetch_pressure.default_left1.2.pickle.gz", "detection_train.default_left5_late2.pickle.gz",
               "varlen_transformer_train.default_left6.pickle.gz",
               "many_streams_raw.garbage_collection_threshold-0.7_left3.pickle.gz",
               "unet_like.roundup_power2_divisions-4_left5.pickle.gz", "vit_train.expandable_left8.pickle.gz"});
  Trace rising = load_trace(kCases + "/detection_train.default_left6.pickle.gz");
  const uint64_t capacity = *capacity_for(rising, std::nullopt);
  CHECK(capacity == 6182600704u);  // the least OOM limit: the fourth OOM's reserved + free memory
  detail::PytorchAllocatorConfig config;
  config.apply_recorded(rising.meta.allocator_settings);
  const auto steps =
      detail::limit_drift(rising.events, rising.meta.initial.reserved(), config, detail::PytorchLimit::Gpu, capacity);
  REQUIRE_FALSE(steps.empty());
  // Raised first to the granted cudaMalloc's reserved bytes at the request it served, at most to the
  // recorded peak (6,327,107,584: granted too).
  CHECK(steps.front().second == 6320816128 - 6182600704);
  CHECK(std::max_element(steps.begin(), steps.end(), [](auto& a, auto& b) { return a.second < b.second; })->second ==
        6327107584 - 6182600704);
  std::string note;
  capacity_for(rising, std::nullopt, &note);
  CHECK(note.find("up to 144506880 bytes higher") != std::string::npos);
}

// Expandable segments at the GPU's own limit (groups probe10, probe11). The limit is followed for maps too,
// checked page by page: the transformer's maps before the driver took its memory passed the least OOM
// limit (diverged at entry 151 begun late, 336 from the start). Its malloc's recoveries came below the
// recorded peak, once the limit had fallen under it, and were read as the program's empty_cache() (it never
// calls it; with max_split_size_mb:64 the partial releases then diverged at entry 339): runs past the least
// limit the OOMs show are marked for the model to read, and now read as malloc's. The inference server
// empties the cache every 8 requests and retries OOM'd requests at half batch: neither reading of all its
// runs replays (malloc's diverged at entry 12,885, an empty_cache() read as a recovery the cache made
// needless), so the runs are read one by one; 5 stay the program's.
TEST_CASE("snapshot cases: expandable segments at a GPU limit that moves, and mixed emptying, replay exactly",
          "[snapshot_cases][capacity]") {
  check_cases({"varlen_transformer_train.expandable_left3.pickle.gz",
               "varlen_transformer_train.expandable_left3_late2.pickle.gz",
               "varlen_transformer_train.expandable_segments-True_max_split_size_mb-64_left3.pickle.gz",
               "infer_server.expandable_left2.pickle.gz", "prefetch_pressure.expandable_left1.2.pickle.gz",
               // The program's empty_cache() beside malloc's recoveries (probe12).
               "prefetch_pressure.default_left1.5_empty1.pickle.gz",
               "varlen_transformer_train.expandable_segments-True_max_split_size_mb-128_left6_empty3.pickle.gz",
               "infer_server.max_split_size_mb-128_left3.pickle.gz"});
  auto empty_caches = [](const Trace& t) {
    return std::count_if(t.events.begin(), t.events.end(),
                         [](const Event& e) { return e.kind == EventKind::EmptyCache; });
  };
  CHECK(empty_caches(load_trace(
            kCases + "/varlen_transformer_train.expandable_segments-True_max_split_size_mb-64_left3.pickle.gz")) == 0);
  CHECK(empty_caches(load_trace(kCases + "/varlen_transformer_train.expandable_left3.pickle.gz")) == 0);
  CHECK(empty_caches(load_trace(kCases + "/infer_server.expandable_left2.pickle.gz")) == 5);
}

// A memory fraction raised after OOMs (set_per_process_memory_fraction(0.05), two OOMs, then 0.12 after
// step 4): no one limit fits the recording (granted segments pass what the OOMs refused), so no capacity
// was inferred and the first OOM was served (diverged at entry 2137). Now the largest the recording
// needed is the capacity, and the model follows the limit its calls show (detail::limit_drift). A
// what-if capacity on a recording that one fraction explains stands as given.
TEST_CASE("snapshot cases: a memory fraction raised after OOMs replays exactly", "[snapshot_cases][capacity]") {
  auto stats = case_stats();
  const char* file = "varlen_transformer_train.default_cap0.05_frac4-0.12.pickle.gz";
  REQUIRE(stats.count(file) == 1);
  check_exact(file, stats[file]);  // from the job's first fraction
  Trace trace = load_trace(kCases + "/" + file);
  std::string note;
  const std::optional<uint64_t> inferred = capacity_for(trace, std::nullopt, &note);
  REQUIRE(inferred);
  CHECK(*inferred == recorded_peak(trace));
  CHECK(note.find("changed along the run") != std::string::npos);
  FidelityOptions options;
  options.capacity = inferred;
  CHECK(check_fidelity(trace, options).exact);
  CHECK(plain_replay_peak(trace, inferred) == recorded_peak(trace));
  // One fraction explains this one: a larger what-if capacity serves its OOMs (no drift applied).
  Trace one = load_trace(kCases + "/gpt2_oom_backoff.default_cap0.12.stacks.pickle.gz");
  detail::PytorchAllocatorConfig config;
  config.apply_recorded(one.meta.allocator_settings);
  CHECK(detail::limit_drift(one.events, one.meta.initial.reserved(), config, detail::PytorchLimit::Fraction,
                            uint64_t{20} << 30)
            .empty());
}

// The GPU's own limit followed along a trace: an OOM the GPU caused sets it (reserved + free memory), a
// recovery of malloc's (cached segments released, then the request's segment granted) shows it lower,
// below what was reserved before the releases plus that segment.
TEST_CASE("pytorch: the GPU's limit followed along the trace's device calls", "[pytorch][capacity]") {
  std::vector<Event> events = {
      entry(EventKind::SegmentAlloc, 0x7f0000000000, 20 * MiB),
      entry(EventKind::Alloc, 0x7f0000000000, 2 * MiB),
      entry(EventKind::Oom, 10 * MiB, 100 * MiB),  // the GPU's: 10 MiB free for a 100 MiB segment; limit 30 MiB
      entry(EventKind::Free, 0x7f0000000000, 2 * MiB),
      entry(EventKind::SegmentFree, 0x7f0000000000, 20 * MiB),  // malloc's recovery for the next request
      entry(EventKind::SegmentAlloc, 0x7f0002000000, 2 * MiB),
      entry(EventKind::Alloc, 0x7f0002000000, 512 * 1024),  // its 2 MiB segment failed with 20 MiB reserved
  };
  detail::PytorchAllocatorConfig config;
  const auto steps = detail::limit_drift(events, 0, config, detail::PytorchLimit::Gpu, 30 * MiB);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].first == 6);
  CHECK(steps[0].second == static_cast<int64_t>(22 * MiB - 1) - static_cast<int64_t>(30 * MiB));
  // One limit explains it all (the recovery's segment fits under the OOM's limit): nothing to follow.
  events[5].size = 20 * MiB;
  events[6].size = 5 * MiB;  // a 20 MiB segment: failed below 20 + 20 MiB, above the 30 MiB limit
  CHECK(detail::limit_drift(events, 0, config, detail::PytorchLimit::Gpu, 30 * MiB).empty());
  // No OOM of the GPU's (a memory fraction's: more free than the segment): nothing either.
  events[2].addr = 200 * MiB;
  CHECK(detail::limit_drift(events, 0, config, detail::PytorchLimit::Gpu, 30 * MiB).empty());
}

// An inference server retrying OOM'd requests at half their batch with empty_cache() every 8 requests, and a
// UNet-like convolutional net doubling its batch (group probe4): exact as recorded, kept as regressions.
TEST_CASE("snapshot cases: an inference server with retried OOMs and a growing conv net replay exactly",
          "[snapshot_cases]") {
  check_cases({"infer_server.default_cap0.04_ring4000.pickle.gz", "infer_server.expandable_left3.pickle.gz",
               "unet_like.default_left8_late2.pickle.gz", "unet_like.expandable_cap0.1.pickle.gz"});
}

// Group probe15 (H100, 2026-11-26). The history stopped and restarted, cleared while recording, its ring grown:
// each begins mid-run like a late start. Its ring made smaller while recording (_record_memory_history called
// again with max_entries=1000 after a run without a bound): PyTorch's ring keeps the 3,898 entries past the
// new size and returns them between the ring's halves, out of time order; read as history they diverged at
// entry 1,663, dropped they leave a 1,003-entry window that replays exactly. torch.cuda.empty_cache() inside
// use_mem_pool (the default pools' cache stays while the pool is in use, a deleted graph's pool goes).
TEST_CASE(
    "snapshot cases: histories restarted, cleared or re-ringed mid-run, and empty_cache in a pool, replay exactly",
    "[snapshot_cases]") {
  check_cases({"gpt2_train.default_hist1-ring1000.pickle.gz", "gpt2_train.default_hist2-off_hist3-on.pickle.gz",
               "gpt2_train.default_ring2000_hist2-ring5000.pickle.gz", "gpt2_train.expandable_hist2-clear.pickle.gz",
               "mempool_empty_inside.default.pickle.gz", "mempool_empty_inside.default_late1.pickle.gz",
               "mempool_empty_inside.default_ring60.pickle.gz", "lora_finetune.default_left3.pickle.gz",
               "lora_finetune.expandable_cap0.05.pickle.gz"});
  Trace stale = load_trace(kCases + "/gpt2_train.default_hist1-ring1000.pickle.gz");
  CHECK(stale.meta.dropped_stale_entries == 3898);
  CHECK(stale.meta.initial.reserved() == 15286140928u);
  for (size_t i = 1; i < stale.events.size(); ++i) REQUIRE(stale.events[i].time_us >= stale.events[i - 1].time_us);
  // No other history has an entry earlier than one before it.
  CHECK(load_trace(kCases + "/gpt2_train.default_hist2-off_hist3-on.pickle.gz").meta.dropped_stale_entries == 0);
}

// A contrastive two-tower model (probe15): `fidelity` is exact, but the process took device memory outside
// the allocator early on (352 MiB below its fourth segment, later reused by its segments), so the CUDA
// model's addresses order equal-sized free blocks otherwise and plain replay on them misses the recorded
// peak. Replayed as `fraglab replay` does by default (AddressModel::Auto), the pytorch policy at the trace's
// own settings asks for the recorded segments and gets the recorded addresses: the recorded peak. Any other
// policy, or other settings, gets the CUDA model.
TEST_CASE("replay: the recording's own addresses for the model of its allocator", "[snapshot_cases][addresses]") {
  auto stats = case_stats();
  for (const char* file : {"clip_contrastive.default_left4.pickle.gz", "clip_contrastive.default_cap0.06.pickle.gz"}) {
    INFO(file);
    REQUIRE(stats.count(file) == 1);
    check_exact(file, stats[file]);
    Trace trace = load_trace(kCases + "/" + file);
    const std::optional<uint64_t> capacity = capacity_for(trace, std::nullopt);
    auto replay = [&](const char* policy, AddressModel addresses) {
      SimDeviceConfig config;
      config.capacity = capacity;
      config.addresses = addresses;
      MemorySource source(trace);
      ReplayOptions options;
      options.oracle_bound = false;
      options.on_oom = OnOom::Skip;
      return replay_simulated(source, PolicySpec::parse(policy), config, options, &trace.events);
    };
    ReplayResult own = replay("pytorch", AddressModel::Auto);
    CHECK(own.addresses == AddressModel::Recorded);
    CHECK(own.reserved.bytes == recorded_peak(trace));
    CHECK(replay("pytorch", AddressModel::Cuda).reserved.bytes > recorded_peak(trace));  // the model's addresses
    CHECK(replay("pytorch:limit=auto", AddressModel::Auto).addresses == AddressModel::Recorded);
    CHECK(replay("pytorch:max_split_size_mb=64", AddressModel::Auto).addresses == AddressModel::Cuda);
    CHECK(replay("bestfit", AddressModel::Auto).addresses == AddressModel::Cuda);
  }
  // A trace with no recorded segment calls has nothing to follow: the CUDA model, even when asked.
  Trace generated;
  generated.events = {Event{.kind = EventKind::Alloc, .id = 0, .size = 4096}, Event{.kind = EventKind::Free, .id = 0}};
  CHECK(addresses_for(AddressModel::Recorded, PolicySpec::parse("pytorch"), generated.meta, &generated.events) ==
        AddressModel::Cuda);
  CHECK(addresses_for(AddressModel::Auto, PolicySpec::parse("pytorch"), generated.meta, &generated.events) ==
        AddressModel::Cuda);
  CHECK(addresses_for(AddressModel::Bump, PolicySpec::parse("pytorch"), generated.meta, nullptr) == AddressModel::Bump);
}

// Group probe16 (H100, 2026-11-26): another process on the GPU gave memory back mid-run (all but 5 or 4 GiB
// taken, then 3 or 2 GiB of it freed after step 4 or 5): OOMs at the first limit, then segments granted far
// above it. The limit followed along the trace rises with the grants (up to 3.1 GB over the least OOM limit
// for the transformer); all exact. (Taking more mid-run failed where PyTorch held the memory: no such run.)
TEST_CASE("snapshot cases: the GPU's limit rising mid-run as another process frees memory replays exactly",
          "[snapshot_cases][capacity]") {
  check_cases({"varlen_transformer_train.default_left5_hog4+3.pickle.gz",
               "varlen_transformer_train.expandable_left5_hog4+3.pickle.gz",
               "infer_server.default_left4_hog5+2.pickle.gz",
               // probe18: a server that takes 85% of the free memory for its KV cache up front (one tensor, as
               // vLLM's gpu_memory_utilization does) and serves in the rest, OOM'd requests retried at half batch.
               "kv_prealloc_serve.default_left6.pickle.gz", "kv_prealloc_serve.expandable_left6.pickle.gz",
               "kv_prealloc_serve.default_cap0.2_ring3000.pickle.gz"});
  Trace trace = load_trace(kCases + "/varlen_transformer_train.default_left5_hog4+3.pickle.gz");
  std::string note;
  const uint64_t capacity = *capacity_for(trace, std::nullopt, &note);
  CHECK(capacity == 5115150336u);  // the least OOM limit
  CHECK(note.find("up to 3139239936 bytes higher") != std::string::npos);
}

// Group issue39 (H200, 2026-11-28): expandable segments with max_split_size_mb, roundup_power2_divisions and the
// collector on training whose shapes change every step (a bf16 causal LM with gradient clipping and a validation
// loop, at the GPU's limit; the varying-shape transformer under a fraction), and KV caches grown by torch.cat each
// token across max_split_size_mb:128 (unlimited, expandable, at the GPU's limit, ten requests). Each replays call
// for call, and plain replay (the driver's addresses as the model places them) reaches the recorded peak.
TEST_CASE("snapshot cases: expandable segments with max_split_size_mb, rounding and the collector replay exactly",
          "[snapshot_cases][settings]") {
  check_cases(
      {"lm_varlen_bf16.expandable_segments-True_max_split_size_mb-128.pickle.gz",
       "lm_varlen_bf16.expandable_segments-True_max_split_size_mb-64_roundup_power2_divisions-4.pickle.gz",
       "lm_varlen_bf16.expandable_segments-True_garbage_collection_threshold-0.6_max_split_size_mb-128_cap0.1867."
       "pickle.gz",
       "lm_varlen_bf16_val.expandable_segments-True_max_split_size_mb-128_left24.6.pickle.gz",
       "varlen_transformer_train.expandable_segments-True_max_split_size_mb-128.pickle.gz",
       "varlen_transformer_train.expandable_segments-True_max_split_size_mb-64_roundup_power2_divisions-4."
       "pickle.gz",
       "varlen_transformer_train.expandable_segments-True_garbage_collection_threshold-0.6_max_split_size_mb-128_"
       "cap0.0664.pickle.gz"});
}

TEST_CASE("snapshot cases: KV caches grown by torch.cat under max_split_size_mb replay exactly, plain replay too",
          "[snapshot_cases][settings]") {
  check_cases({"kv_cat_serve.max_split_size_mb-128.pickle.gz",
               "kv_cat_serve.expandable_segments-True_max_split_size_mb-128.pickle.gz",
               "kv_cat_serve.max_split_size_mb-128_left5.pickle.gz",
               "kv_cat_serve_long.max_split_size_mb-128.pickle.gz"});
}

// A MemPool beside the default pools, deleted with its blocks cached: ~MemPool's emptyCache of the pool returned its
// small segment, then its large one, and none of the default pools' cached pages. No default request told the small
// segment's pool apart: read as the default pools', the run was torch.cuda.empty_cache(), which in the model returned
// default pages the recording kept (diverged at the deletion; plain replay 3.2% high under max_split_size_mb:128).
TEST_CASE("pool inference: a deleted MemPool's small segment goes with it, the default pools keep theirs",
          "[snapshot_cases][pools][mempool]") {
  check_cases(
      {"mempool_mixed_burst.default.pickle.gz", "mempool_mixed_burst.expandable.pickle.gz",
       "mempool_mixed_burst.max_split_size_mb-128.pickle.gz",
       "mempool_mixed_burst.expandable_segments-True_max_split_size_mb-128.pickle.gz",
       "mempool_mixed_burst.expandable_segments-True_max_split_size_mb-64_roundup_power2_divisions-4.pickle.gz"});
  Trace t = load_trace(kCases + "/mempool_mixed_burst.expandable.pickle.gz");
  size_t first_unmap = 0;
  while (first_unmap < t.events.size() && t.events[first_unmap].kind != EventKind::SegmentUnmap) ++first_unmap;
  REQUIRE(first_unmap < t.events.size());
  REQUIRE(first_unmap > 0);
  const Event& before = t.events[first_unmap - 1];
  REQUIRE(before.kind == EventKind::PoolRelease);
  CHECK(t.meta.pools[before.pool].empties_on_release);
  // The small segment's requests are the pool's: every request before the deletion that landed where the first
  // unmap was (a later default segment may take the same addresses).
  const Event& small = t.events[first_unmap];
  size_t in_small = 0;
  for (size_t i = 0; i < first_unmap; ++i)
    if (const Event& e = t.events[i];
        e.kind == EventKind::Alloc && e.addr >= small.addr && e.addr < small.addr + small.size) {
      CHECK(e.pool == before.pool);
      ++in_small;
    }
  CHECK(in_small > 0);
  // No empty_cache() of the program follows the deletion: the run is the pool's alone.
  CHECK(t.events[first_unmap + 1].kind == EventKind::SegmentUnmap);
  CHECK(t.events[first_unmap + 2].kind != EventKind::EmptyCache);
}
