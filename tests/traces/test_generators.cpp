// Synthetic workload generators: each kind's shape (footprint, lifetime structure),
// determinism for a seed, and that a different seed gives a different trace.
#include <unistd.h>
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "import/trace_import.h"
#include "traces/generators/generators.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

using namespace fraglab;
using namespace fraglab::gen;

namespace {

class CollectingWriter final : public TraceWriter {
 public:
  std::vector<Event> events;
  void write(const Event* e, size_t n) override { events.insert(events.end(), e, e + n); }
  void finish() override {}
};

template <typename Generate>
Trace generate(Generate g) {
  CollectingWriter w;
  EventSink sink(w);
  g(sink);
  sink.flush();
  Trace t;
  t.events = std::move(w.events);
  return t;
}

TraceStats stats_of(const Trace& t) {
  MemorySource src(t);
  return compute_stats(src);
}

// Per alloc event index: the event index of its free (or SIZE_MAX when never freed).
std::map<size_t, size_t> free_index(const Trace& t) {
  std::map<size_t, size_t> result;
  std::map<AllocId, size_t> live;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (e.kind == EventKind::Alloc) {
      live[e.id] = i;
      result[i] = SIZE_MAX;
    } else if (e.kind == EventKind::Free) {
      result[live.at(e.id)] = i;
      live.erase(e.id);
    }
  }
  return result;
}

// Live requested bytes after every event.
std::vector<uint64_t> live_curve(const Trace& t) {
  std::vector<uint64_t> size_of, curve;
  uint64_t live = 0;
  for (const Event& e : t.events) {
    if (e.kind == EventKind::Alloc) {
      if (e.id >= size_of.size()) size_of.resize(e.id + 1);
      size_of[e.id] = e.size;
      live += e.size;
    } else if (e.kind == EventKind::Free) {
      live -= size_of[e.id];
    }
    curve.push_back(live);
  }
  return curve;
}

TrainOptions small_train() {
  TrainOptions o;
  o.layers = 4;
  o.hidden = 256;
  o.heads = 4;
  o.vocab = 5000;
  o.batch = 2;
  o.seq = "fixed:128";
  o.steps = 3;
  return o;
}

}  // namespace

TEST_CASE("gen train: parameters and AdamW states live forever, everything else is freed", "[gen]") {
  TrainOptions o = small_train();
  Trace t = generate([&](EventSink& s) { generate_train(o, 1, s); });
  const uint64_t params = 2 + 12 * 4 + 2;
  TraceStats st = stats_of(t);
  CHECK(st.never_freed == 3 * params);  // weights, exp_avg, exp_avg_sq
  auto frees = free_index(t);
  size_t k = 0;
  for (const auto& [alloc, free] : frees) {  // the first allocations are the parameters
    if (k++ == params) break;
    CHECK(free == SIZE_MAX);
  }
}

TEST_CASE("gen train: activations saved in forward are freed in reverse order in backward", "[gen]") {
  TrainOptions o = small_train();
  Trace t = generate([&](EventSink& s) { generate_train(o, 1, s); });
  auto frees = free_index(t);
  // The loss is the 4-byte allocation after the largest ones; take step 2's.
  std::vector<size_t> loss_allocs;
  for (size_t i = 0; i < t.events.size(); ++i)
    if (t.events[i].kind == EventKind::Alloc && t.events[i].size == 4 && i + 1 < t.events.size() &&
        t.events[i + 1].kind == EventKind::Alloc && t.events[i + 1].size == 4)
      loss_allocs.push_back(i);  // loss, then d loss / d loss
  REQUIRE(loss_allocs.size() == 3);
  size_t loss = loss_allocs[1], step_start = loss_allocs[0];
  std::vector<std::pair<size_t, size_t>> saved;  // (alloc, free) alive at the loss
  for (const auto& [a, f] : frees)
    if (a > step_start && a < loss && f > loss && f != SIZE_MAX) saved.push_back({a, f});
  REQUIRE(saved.size() > 100);
  uint64_t pairs = 0, lifo = 0;
  for (size_t i = 0; i < saved.size(); ++i)
    for (size_t j = i + 1; j < saved.size(); ++j, ++pairs) lifo += saved[j].second < saved[i].second;
  // Only the model's returned fp32 logits outlive backward out of order.
  CHECK(static_cast<double>(lifo) / static_cast<double>(pairs) > 0.98);
}

TEST_CASE("gen train: checkpointing lowers the peak; shapes follow the options", "[gen]") {
  TrainOptions o = small_train();
  o.layers = 8;
  o.vocab = 1000;  // activations, not logits, dominate
  o.seq = "fixed:512";
  o.attention = "eager";
  uint64_t full = stats_of(generate([&](EventSink& s) { generate_train(o, 1, s); })).peak_live_requested;
  o.checkpoint = true;
  uint64_t ckpt = stats_of(generate([&](EventSink& s) { generate_train(o, 1, s); })).peak_live_requested;
  CHECK(ckpt < full * 0.6);
  o.checkpoint = false;
  o.attention = "flash";
  uint64_t flash = stats_of(generate([&](EventSink& s) { generate_train(o, 1, s); })).peak_live_requested;
  CHECK(flash < full);
  // The largest request is the fp32 logits (tokens x vocab x 4) or the eager score matrix.
  TraceStats st = stats_of(generate([&](EventSink& s) { generate_train(small_train(), 1, s); }));
  CHECK(st.sizes.max == static_cast<double>(2 * 128 * 5000 * 4));
}

TEST_CASE("gen train: deterministic for a seed; varying lengths differ by seed", "[gen]") {
  TrainOptions o = small_train();
  o.seq = "uniform:32:256";
  o.seq_multiple = 8;
  Trace a = generate([&](EventSink& s) { generate_train(o, 7, s); });
  Trace b = generate([&](EventSink& s) { generate_train(o, 7, s); });
  Trace c = generate([&](EventSink& s) { generate_train(o, 8, s); });
  CHECK(a.events == b.events);
  CHECK(a.events != c.events);
}

TEST_CASE("gen serve: KV caches grow and are all released; paged uses fixed pages", "[gen]") {
  ServeOptions o;
  o.requests = 200;
  o.rate = 50;
  o.layers = 4;
  o.hidden = 512;
  o.vocab = 1000;
  o.max_batch = 8;
  o.prompt = "uniform:16:64";
  o.output = "uniform:8:32";
  const uint64_t bpt = 2 * 4 * 512 * 2 / 2;
  SECTION("contiguous, regrown every token") {
    Trace t = generate([&](EventSink& s) { generate_serve(o, 3, s); });
    TraceStats st = stats_of(t);
    CHECK(st.never_freed == 0);
    // Every KV size is a whole number of tokens; each regrowth allocates before it frees.
    uint64_t kv_allocs = 0;
    for (const Event& e : t.events)
      if (e.kind == EventKind::Alloc && e.size % bpt == 0 && e.size / bpt <= 96 && e.size / bpt >= 16) ++kv_allocs;
    CHECK(kv_allocs > 200 * 2 * 8);  // at least 8 growths per tensor per request
    // The running batch bounds the footprint: weights + 8 requests x 96 tokens x 2 tensors + temporaries.
    uint64_t weights = 12ull * 4 * 512 * 512 * 2 + 2 * 1000 * 512 * 2;
    CHECK(st.peak_live_requested < weights + 8 * 96 * 2 * bpt * 2 + 64 * 6 * 512 * 2 * 8);
    CHECK(st.peak_live_requested > weights);
  }
  SECTION("paged") {
    o.kv = "paged";
    o.page_tokens = 16;
    Trace t = generate([&](EventSink& s) { generate_serve(o, 3, s); });
    std::map<uint64_t, uint64_t> by_size;
    for (const Event& e : t.events)
      if (e.kind == EventKind::Alloc) ++by_size[e.size];
    CHECK(by_size[16 * bpt] >= 200 * 2 * 2);  // >= 2 pages per tensor per request
    CHECK(stats_of(t).never_freed == 0);
  }
  SECTION("deterministic for a seed, seeds differ") {
    Trace a = generate([&](EventSink& s) { generate_serve(o, 3, s); });
    Trace b = generate([&](EventSink& s) { generate_serve(o, 3, s); });
    Trace c = generate([&](EventSink& s) { generate_serve(o, 4, s); });
    CHECK(a.events == b.events);
    CHECK(a.events != c.events);
  }
}

TEST_CASE("gen random: the live footprint settles near the target", "[gen]") {
  for (const char* size : {"uniform:1KiB:1MiB", "lognormal:64KiB:1.5", "powerlaw:4KiB:16MiB:1.5"}) {
    for (const char* life : {"exp", "lognormal:1", "powerlaw:2.5"}) {
      RandomOptions o;
      o.allocs = 200000;
      o.size = size;
      o.lifetime = life;
      o.target_live = 256ull << 20;
      Trace t = generate([&](EventSink& s) { generate_random(o, 5, s); });
      auto curve = live_curve(t);
      // Mean over the middle half (after warm-up, before the final release).
      double sum = 0;
      size_t from = curve.size() / 4, to = curve.size() * 3 / 4;
      for (size_t i = from; i < to; ++i) sum += static_cast<double>(curve[i]);
      double mean = sum / static_cast<double>(to - from);
      INFO(size << " " << life << " mean live " << mean);
      CHECK(mean > 0.75 * static_cast<double>(o.target_live));
      CHECK(mean < 1.25 * static_cast<double>(o.target_live));
    }
  }
  RandomOptions o;
  o.allocs = 10000;
  Trace a = generate([&](EventSink& s) { generate_random(o, 1, s); });
  CHECK(a.events == generate([&](EventSink& s) { generate_random(o, 1, s); }).events);
  CHECK(a.events != generate([&](EventSink& s) { generate_random(o, 2, s); }).events);
  o.size = "bogus:1";
  CHECK_THROWS_AS(generate([&](EventSink& s) { generate_random(o, 1, s); }), std::invalid_argument);
}

TEST_CASE("gen adversarial: robson keeps live bytes bounded while sizes double", "[gen]") {
  AdversarialOptions o;
  o.pattern = "robson";
  o.live = 64ull << 20;
  o.min_size = 64 << 10;
  o.max_size = 4 << 20;
  o.rounds = 2;
  Trace t = generate([&](EventSink& s) { generate_adversarial(o, 1, s); });
  auto curve = live_curve(t);
  CHECK(*std::max_element(curve.begin(), curve.end()) <= o.live);
  std::map<uint64_t, uint64_t> level_allocs;
  for (const Event& e : t.events)
    if (e.kind == EventKind::Alloc) ++level_allocs[(e.size + o.align * 4) / (o.min_size)];
  CHECK(level_allocs.size() >= 6);  // 64K, 128K, ... until the budget cannot hold two blocks
  CHECK(stats_of(t).never_freed == 0);
  CHECK(t.events != generate([&](EventSink& s) { generate_adversarial(o, 2, s); }).events);
}

TEST_CASE("gen adversarial: buddy sizes sit just above powers of two; growth reallocates by copy", "[gen]") {
  AdversarialOptions o;
  o.pattern = "buddy";
  o.live = 256ull << 20;
  o.min_size = 4096;
  o.max_size = 8 << 20;
  Trace t = generate([&](EventSink& s) { generate_adversarial(o, 1, s); });
  for (const Event& e : t.events)
    if (e.kind == EventKind::Alloc) REQUIRE(std::has_single_bit(e.size - o.align));
  o.pattern = "growth";
  o.min_size = 1 << 20;
  o.max_size = 64 << 20;
  Trace g = generate([&](EventSink& s) { generate_adversarial(o, 1, s); });
  // alloc(bigger), free(old), alloc(pin): the buffer sizes grow strictly.
  uint64_t last = 0, grows = 0;
  for (size_t i = 0; i + 1 < g.events.size(); ++i) {
    const Event& e = g.events[i];
    if (e.kind == EventKind::Alloc && e.size > o.align && g.events[i + 1].kind == EventKind::Free) {
      if (e.size > last) ++grows;
      last = e.size;
    }
  }
  CHECK(grows > 30);
}

TEST_CASE("fraglab gen: the same seed and options write the same bytes wherever the file goes", "[gen]") {
  const auto dir = std::filesystem::temp_directory_path() / ("fraglab_gen_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string a = (dir / "a.fltrace").string(), b = (dir / "another_name.fltrace").string();
  for (const std::string& out : {a, b}) {
    const std::string cmd =
        std::string(FRAGLAB_CLI) + " gen random --allocs 2000 --seed 7 -o " + out + " > /dev/null 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  CHECK(bytes(a) == bytes(b));
  // The source names the generator and its options, each once under its long name, not the output.
  CHECK(load_trace(a).meta.source == "fraglab gen random --allocs 2000 --seed 7");
  std::filesystem::remove_all(dir);
}
