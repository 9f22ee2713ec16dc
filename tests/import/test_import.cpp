// The import layer (import/trace_import.h): PyTorch's model reaches a snapshot's importer as an argument
// (ReadOptions::model), never through process-wide state, so reads with and without it can alternate in
// one process, from any thread, and each reads what it asked for.
#include <catch2/catch.hpp>
#include <future>
#include <string>
#include <vector>

#include "import/trace_import.h"
#include "sim/pool_checker.h"
#include "traces/formats/pytorch/snapshot_model.h"
#include "traces/trace_io.h"

using namespace fraglab;

namespace {

const std::string kCases = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/";

// What the model judges, side by side: the pools, the settings read, the events.
bool same_reading(const Trace& a, const Trace& b) {
  return a.events == b.events && a.meta.pools == b.meta.pools &&
         a.meta.allocator_settings == b.meta.allocator_settings &&
         a.meta.settings_inferred == b.meta.settings_inferred && a.meta.expandable_flipped == b.meta.expandable_flipped;
}

}  // namespace

TEST_CASE("import: the allocator model is passed to the importer, not installed", "[snapshot][import]") {
  // A snapshot that records no settings: only the model's replays can read them (unrecorded_settings.h).
  const std::string unrecorded =
      kCases +
      "gpt2_oom_backoff.garbage_collection_threshold-0.5_max_split_size_mb-64_cap0.12_late1_nosettings.pickle.gz";
  const Trace rules_alone = read_trace(unrecorded);
  const Trace judged = load_trace(unrecorded);
  CHECK_FALSE(rules_alone.meta.settings_inferred);
  CHECK(judged.meta.settings_inferred);
  CHECK(judged.meta.allocator_settings.at("max_split_size") == "67108864");  // max_split_size_mb:64, as recorded
  // Nothing is left behind by either read: each gives what it gave, in either order, and a model named in
  // the options is the one used.
  CHECK(same_reading(read_trace(unrecorded), rules_alone));
  CHECK(same_reading(load_trace(unrecorded), judged));
  CHECK(same_reading(read_trace(unrecorded, with_pytorch_model()), judged));
  const SnapshotModel none;
  ReadOptions by_rules;
  by_rules.model = &none;
  CHECK(same_reading(load_trace(unrecorded, by_rules), rules_alone));
  // Two threads reading with different models at once read what each asked for.
  auto a = std::async(std::launch::async, [&] { return read_trace(unrecorded); });
  auto b = std::async(std::launch::async, [&] { return load_trace(unrecorded); });
  CHECK(same_reading(a.get(), rules_alone));
  CHECK(same_reading(b.get(), judged));
}

TEST_CASE("import: the deferred pool check asks the model it is given", "[snapshot][import]") {
  ReadOptions deferred;
  deferred.defer_pool_check = true;
  const Trace t = load_trace(std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/gpt2_train.default.pickle.gz", deferred);
  // PyTorch's model has a check to run (no private pool inferred); without a checker nothing is pending and
  // the rules stand.
  REQUIRE(pool_check_pending(t));
  CHECK(pool_check_pending(t, pytorch_snapshot_model()));
  CHECK(pools_confirmed(t));
  const SnapshotModel none;
  CHECK_FALSE(pool_check_pending(t, none));
  CHECK(pools_confirmed(t, none));
}
