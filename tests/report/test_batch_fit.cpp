// fraglab fit (report/batch_fit.h): probes aligned, sizes modelled in the batch, the largest batch that fits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "allocators/registry.h"
#include "import/trace_import.h"
#include "report/batch_fit.h"
#include "report/program_attribution.h"
#include "report/tune.h"
#include "sim/replay_simulated.h"
#include "traces/trace_io.h"

using namespace fraglab;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

// A training-shaped program at `batch`: 40 MiB of parameters, then `steps` steps of 6 activations of
// batch x 3 MiB (+ 4 KiB) kept for backward, a workspace of constant size, a quadratic attention buffer
// (batch^2 x 64 KiB), and gradients of the parameters' size, freed at the next step.
Trace program(uint64_t batch, int steps = 3) {
  Trace t;
  IdSlots ids;
  auto alloc = [&](uint64_t size) {
    Event e;
    e.kind = EventKind::Alloc;
    e.id = ids.acquire();
    e.size = size;
    t.events.push_back(e);
    return e.id;
  };
  auto free = [&](AllocId id) {
    Event e;
    e.kind = EventKind::Free;
    e.id = id;
    t.events.push_back(e);
    ids.release(id);
  };
  for (int p = 0; p < 4; ++p) alloc(10 * kMiB);
  std::vector<AllocId> grads;
  for (int s = 0; s < steps; ++s) {
    for (AllocId g : grads) free(g);
    grads.clear();
    std::vector<AllocId> acts;
    for (int k = 0; k < 6; ++k) acts.push_back(alloc(batch * 3 * kMiB + 4096));
    AllocId ws = alloc(8 * kMiB);
    AllocId attn = alloc(batch * batch * 64 * 1024);
    free(attn);
    free(ws);
    for (int k = 5; k >= 0; --k) {
      free(acts[k]);
      if (k % 2 == 0) grads.push_back(alloc(10 * kMiB));
    }
  }
  return t;
}

std::vector<BatchProbe> probes_at(std::initializer_list<uint64_t> batches) {
  std::vector<BatchProbe> out;
  for (uint64_t b : batches) out.push_back({"b" + std::to_string(b), b, program(b)});
  return out;
}

bool fits_directly(const Trace& t, uint64_t capacity, const std::string& conf) {
  ReplayOptions o;
  o.oracle_bound = false;
  SimDeviceConfig config;
  config.capacity = capacity;
  config.addresses = AddressModel::Cuda;
  MemorySource source(t);
  ReplayResult r = replay_simulated(source, PolicySpec::parse(policy_string("pytorch", conf)), config, o, &t.events);
  return r.ooms.empty();
}

}  // namespace

TEST_CASE("fit: probes that align exactly give exact laws and the program at any batch", "[fit]") {
  // Three points always lie on a quadratic: a square is believed from four probes; with three it is irregular.
  CHECK(BatchModel(probes_at({2, 4, 6})).law_counts()[static_cast<size_t>(SizeLaw::Irregular)] == 3);
  BatchModel model(probes_at({4, 2, 8, 6}));
  CHECK(model.reference().batch == 8);
  CHECK(model.alignment().exact);
  std::vector<uint64_t> laws = model.law_counts();
  CHECK(laws[static_cast<size_t>(SizeLaw::Linear)] == 18);    // 6 activations x 3 steps
  CHECK(laws[static_cast<size_t>(SizeLaw::Quadratic)] == 3);  // the attention buffer
  CHECK(laws[static_cast<size_t>(SizeLaw::Irregular)] == 0);
  CHECK(laws[static_cast<size_t>(SizeLaw::Unmatched)] == 0);
  // The synthesized trace at a batch no probe ran is the program at that batch, event for event.
  for (uint64_t b : {1, 9, 23}) {
    Trace want = program(b), got = model.at(b);
    REQUIRE(got.events.size() == want.events.size());
    for (size_t i = 0; i < want.events.size(); ++i) {
      CHECK(got.events[i].kind == want.events[i].kind);
      CHECK(got.events[i].size == want.events[i].size);
    }
  }
}

TEST_CASE("fit: the largest batch that fits is the one a replay of the real program at each batch finds", "[fit]") {
  // Two probes cannot see the attention buffer's square: four can, and their answer is the real program's.
  const uint64_t capacity = 400 * kMiB;
  FitOptions o;
  o.capacity = capacity;
  o.jobs = 2;
  o.search_best = false;
  BatchModel four(probes_at({2, 4, 6, 8}));
  FitReport r = fit_batch(four, o);
  REQUIRE(r.answers.size() >= 2);
  for (const SettingAnswer& a : r.answers) {
    uint64_t want = 0;
    for (uint64_t b = 1; b <= 64; ++b)
      if (fits_directly(program(b), capacity, a.conf)) want = b;
    INFO(a.label << " " << a.conf);
    CHECK(a.largest_batch == want);
    CHECK(want > 0);
  }
  // Hand-made probes record no allocator calls, so no recorded peak to check the model against; it says so.
  CHECK(r.checks.empty());
  CHECK(r.confidence.rfind("high", 0) == std::string::npos);
  CHECK(r.live_limit_batch >= r.answers.front().largest_batch);
}

TEST_CASE("fit: probes that do not align are matched allocation by allocation and say so", "[fit]") {
  std::vector<BatchProbe> probes = probes_at({2, 4});
  // The smaller probe made an extra allocation early on (a workspace only that shape asked for).
  Trace& t = probes[0].trace;
  Event extra;
  extra.kind = EventKind::Alloc;
  extra.id = 1000;
  extra.size = 123;
  Event gone = extra;
  gone.kind = EventKind::Free;
  t.events.insert(t.events.begin() + 6, {extra, gone});
  BatchModel model(std::move(probes));
  CHECK_FALSE(model.alignment().exact);
  CHECK(model.alignment().others_unmatched_allocs == 1);
  CHECK(model.alignment().unmatched_allocs == 0);
  CHECK(model.law_counts()[static_cast<size_t>(SizeLaw::Linear)] >= 18);
}

TEST_CASE("fit: bad probe arguments are usage errors", "[fit]") {
  CHECK_THROWS_AS(parse_probe_arg("x.pickle.gz"), std::invalid_argument);
  CHECK_THROWS_AS(parse_probe_arg("x.pickle.gz@0"), std::invalid_argument);
  CHECK_THROWS_AS(parse_probe_arg("x.pickle.gz@-3"), std::invalid_argument);
  CHECK(parse_probe_arg("dir@x/run.pickle.gz@12") == std::pair<std::string, uint64_t>{"dir@x/run.pickle.gz", 12});
  CHECK_THROWS_AS(BatchModel(probes_at({4})), std::invalid_argument);
  CHECK_THROWS_AS(BatchModel(probes_at({4, 4})), std::invalid_argument);
}

namespace {

const std::string kFitData = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/fit/";

// The real runs (tests/data/fit/README.md): per program and setting, the largest batch that fit the memory
// fraction, its reserved_bytes.all.peak, and the capacity.
struct Truth {
  uint64_t largest = 0, peak = 0, capacity = 0;
};
std::map<std::string, Truth> sweep_truth() {
  std::map<std::string, Truth> out;
  std::ifstream in(kFitData + "sweep.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    std::string key = j["program"].get<std::string>() + "|" + j["conf"].get<std::string>();
    Truth& t = out[key];
    t.capacity = j["capacity_bytes"];
    if (j["fits"].get<bool>() && j["batch"].get<uint64_t>() > t.largest) {
      t.largest = j["batch"];
      t.peak = j["reserved_peak"];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("fit: on real H200 recordings the predicted largest batch is the real one, its peak to the byte", "[fit]") {
  std::map<std::string, Truth> truth = sweep_truth();
  REQUIRE(truth.size() == 8);
  // Three programs: a causal LM's training step, a training step at sequence lengths that vary by step, and a
  // KV-cache server; probes at batches 2, 4 and 6 recorded under the defaults (Python stacks).
  for (const char* program : {"causal_lm", "varlen", "kv_server"}) {
    std::vector<BatchProbe> probes;
    for (uint64_t b : {2, 4, 6})
      probes.push_back({program, b, load_trace(kFitData + program + ".b" + std::to_string(b) + ".default.pickle.gz")});
    BatchModel model(std::move(probes));
    FitOptions o;
    o.capacity = truth[std::string(program) + "|default"].capacity;
    o.jobs = 2;
    o.search_best = false;
    FitReport r = fit_batch(model, o);
    for (const SettingAnswer& a : r.answers) {
      const Truth& t = truth[std::string(program) + "|" + (a.conf.empty() ? "default" : a.conf)];
      INFO(program << " under '" << a.conf << "'");
      REQUIRE(t.largest > 0);
      CHECK(a.largest_batch == t.largest);
      for (const BatchPoint& p : a.points)
        if (p.batch == t.largest) CHECK(p.peak_reserved == t.peak);
    }
    // The model replays every probe's own peak, and the smaller two predict the third's.
    for (const ModelCheck& c : r.checks) CHECK(c.predicted_peak == c.recorded_peak);
  }
}

TEST_CASE("fit: a convolutional model whose cuDNN workspaces change with the batch", "[fit]") {
  // ResNet-50: cuDNN picks algorithms (and workspaces) by shape, so the probes' allocations differ in number (2755,
  // 2797, 2785: batch 2 ran some convolutions without a workspace). A workspace that cannot be had is survived (the
  // convolution catches the OOM and runs another algorithm): the real run at batch 36 caught 41. The real runs fit
  // batch 36 (defaults) and 37 (expandable segments).
  std::map<std::string, Truth> truth = sweep_truth();
  std::vector<BatchProbe> probes;
  for (uint64_t b : {2, 4, 6})
    probes.push_back({"vision", b, load_trace(kFitData + "vision.b" + std::to_string(b) + ".default.pickle.gz")});
  BatchModel model(std::move(probes));
  CHECK_FALSE(model.alignment().exact);
  CHECK(std::count(model.optional_events().begin(), model.optional_events().end(), true) > 0);
  FitOptions o;
  o.capacity = truth["vision|default"].capacity;
  o.jobs = 2;
  o.search_best = false;
  FitReport r = fit_batch(model, o);
  for (const SettingAnswer& a : r.answers) {
    const Truth& t = truth[std::string("vision|") + (a.conf.empty() ? "default" : a.conf)];
    INFO("vision under '" << a.conf << "'");
    CHECK(a.largest_batch == t.largest);
    for (const BatchPoint& p : a.points)  // within 1% of PyTorch's reserved_bytes.all.peak (0.1% and exact here)
      if (p.batch == t.largest)
        CHECK(std::abs(static_cast<double>(p.peak_reserved) - static_cast<double>(t.peak)) <= 0.01 * t.peak);
  }
}

TEST_CASE("diagnose names the notebook line that holds the memory at an OOM kept alive by the exception",
          "[fit][diagnose]") {
  // A cell ran a forward at a batch too large for a 0.05 fraction of an H200; the OutOfMemoryError kept the
  // cell's frame (and its tensors) alive, as IPython's sys.last_traceback does, and the snapshot was taken then.
  Trace t = load_trace(kFitData + "notebook_oom.default_cap0.05.stacks.pickle.gz");
  ProgramAttribution program(t);
  uint64_t oom = 0;
  for (uint64_t i = 0; i < t.events.size(); ++i)
    if (t.events[i].kind == EventKind::Oom) oom = i;
  REQUIRE(oom > 0);
  LiveAttribution live = program.live_before(oom);
  REQUIRE(live.by_site.size() >= 3);
  CHECK(live.by_site[0].key.find(".py:6") != std::string::npos);  // y = model(x)
  CHECK(live.by_site[0].bytes == 4329570304);
  CHECK(live.by_site[1].key.find(".py:4") != std::string::npos);  // the model
  CHECK(program.site_of(t.events[oom]).find(".py:6") != std::string::npos);
  CHECK(live.by_category[0].key == std::string("activations"));
}

TEST_CASE("fit: programs recorded after the model was written (held out) are predicted too", "[fit]") {
  // tests/data/fit/heldout/README.md: a LLaMA with gradient checkpointing, T5, a ViT, each probed at 2, 4 and 6 and
  // swept for the real largest batch under a memory fraction, after fit was written and tuned on the four above.
  std::map<std::tuple<std::string, std::string, uint64_t>, Truth> truth;
  std::ifstream in(kFitData + "heldout/sweep.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    Truth& t = truth[{j["program"].get<std::string>(), j["conf"].get<std::string>(), j["capacity_bytes"]}];
    t.capacity = j["capacity_bytes"];
    if (j["fits"].get<bool>() && j["batch"].get<uint64_t>() > t.largest) {
      t.largest = j["batch"];
      t.peak = j["reserved_peak"];
    }
  }
  std::map<std::string, BatchModel> models;
  for (const char* program : {"llama_ckpt", "t5_train", "vit_train"}) {
    std::vector<BatchProbe> probes;
    for (uint64_t b : {2, 4, 6})
      probes.push_back(
          {program, b, load_trace(kFitData + "heldout/" + program + ".b" + std::to_string(b) + ".default.pickle.gz")});
    models.emplace(program, BatchModel(std::move(probes)));
  }
  size_t exact = 0, cases = 0;
  for (const auto& [key, t] : truth) {
    const auto& [program, conf, capacity] = key;
    if (!t.largest) continue;
    FitOptions o;
    o.capacity = capacity;
    o.jobs = 2;
    o.search_best = false;
    FitReport r = fit_batch(models.at(program), o);
    for (const SettingAnswer& a : r.answers) {
      if ((a.conf.empty() ? std::string("default") : a.conf) != conf) continue;
      INFO(program << " under '" << conf << "' at " << capacity);
      ++cases;
      uint64_t peak = 0;
      for (const BatchPoint& p : a.points)
        if (p.batch == a.largest_batch) peak = p.peak_reserved;
      // Within one batch, and the peak there within 1.5% of PyTorch's; exact for LLaMA and T5.
      CHECK(a.largest_batch + 1 >= t.largest);
      CHECK(a.largest_batch <= t.largest + 1);
      if (a.largest_batch == t.largest) {
        ++exact;
        CHECK(std::abs(static_cast<double>(peak) - static_cast<double>(t.peak)) <= 0.015 * t.peak);
      }
      if (program != "vit_train") {
        CHECK(a.largest_batch == t.largest);
        CHECK(peak == t.peak);
      }
    }
  }
  CHECK(cases == 8);
  CHECK(exact >= 7);  // ViT under expandable segments at 0.0275 predicts 40 against 39 (docs/diagnose.md)
}

TEST_CASE("fit: probes given the wrong batches, or of another program, say so", "[fit]") {
  // The batch-2 program labelled batch 8: its tensors are smaller at the "larger" batch.
  std::vector<BatchProbe> swapped;
  swapped.push_back({"b4", 4, program(4)});
  swapped.push_back({"b2 labelled 8", 8, program(2)});
  BatchModel model(std::move(swapped));
  CHECK(model.alignment().shrinking_allocs >= 18);
  FitOptions o;
  o.capacity = 400 * kMiB;
  o.jobs = 1;
  o.search_best = false;
  o.max_batch = 4096;
  FitReport r = fit_batch(model, o);
  CHECK(r.confidence.rfind("low", 0) == 0);
  CHECK(r.confidence.find("PATH@BATCH") != std::string::npos);
  // Well-labelled probes shrink nowhere.
  CHECK(BatchModel(probes_at({2, 4})).alignment().shrinking_allocs == 0);
}
