// Typed option declarations (allocators/policy_options.h): the default a policy uses is the
// one `fraglab policies` prints, and bounds come from the declaration.
#include <catch2/catch.hpp>
#include <filesystem>

#include "allocators/registry.h"
#include "import/trace_import.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "traces/free_slots.h"
#include "traces/trace_io.h"

namespace fraglab {
namespace {

TEST_CASE("options: a size default prints exactly, with a unit only where it is whole", "[options]") {
  CHECK(option_size_text(0) == "0");
  CHECK(option_size_text(512) == "512");
  CHECK(option_size_text(1024) == "1KiB");
  CHECK(option_size_text(2ull << 20) == "2MiB");
  CHECK(option_size_text(1ull << 40) == "1TiB");
  CHECK(option_size_text(1536) == "1536");                   // 1.5 KiB is not whole
  CHECK(option_size_text(85017493504ull) == "85017493504");  // 81079 MiB: not below 1024 of a unit
  for (uint64_t v : {uint64_t{0}, uint64_t{512}, uint64_t{3} << 30, uint64_t{85017493504}, uint64_t{1536}})
    CHECK(parse_size(option_size_text(v)) == v);
}

TEST_CASE("options: the getters take the default and the bounds from the declaration", "[options]") {
  constexpr SizeOption kSize{"s", 4096, "", 1 << 20};
  constexpr IntOption kInt{"i", 7, "", 1, 9};
  constexpr BoolOption kBool{"b", true, ""};
  constexpr DoubleOption kDouble{"d", 0.5, ""};
  PolicyOptions none;
  CHECK(none.get(kSize) == 4096);
  CHECK(none.get(kInt) == 7);
  CHECK(none.get(kBool));
  CHECK(none.get(kDouble) == 0.5);
  PolicyOptions set = PolicyOptions::parse("s=1MiB,i=9,b=off,d=0.25");
  CHECK(set.get(kSize) == (1u << 20));
  CHECK(set.get(kInt) == 9);
  CHECK_FALSE(set.get(kBool));
  CHECK(set.get(kDouble) == 0.25);
  CHECK_THROWS_AS(PolicyOptions::parse("s=2MiB").get(kSize), PolicyConfigError);
  CHECK_THROWS_AS(PolicyOptions::parse("i=10").get(kInt), PolicyConfigError);
  CHECK(OptionSpec(kSize).default_value == "4KiB");
  CHECK(OptionSpec(kInt).default_value == "7");
  CHECK(OptionSpec(kBool).default_value == "true");
  CHECK(OptionSpec(kDouble).default_value == "0.5");
}

// Setting every option to the default `fraglab policies` prints changes nothing: the printed
// default is the one the policy uses. PyTorch's PYTORCH_CUDA_ALLOC_CONF keys are handed to its
// own parser, whose "unset" and 0 defaults are not values it accepts, so only the options
// fraglab declares for it are set.
TEST_CASE("options: every policy behaves the same with its printed defaults given explicitly", "[options]") {
  Trace trace = load_trace(
      (std::filesystem::path(FRAGLAB_SOURCE_DIR) / "traces" / "corpus" / "side_stream_prefetch.default.pickle.gz")
          .string());
  for (const PolicyInfo& info : policy_registry()) {
    std::string explicit_spec = info.name;
    for (const OptionSpec& o : info.options) {
      if (info.name == "pytorch" && o.key != "recorded_settings" && o.key != "total_memory") continue;
      explicit_spec += (explicit_spec == info.name ? ":" : ",") + o.key + "=" + o.default_value;
    }
    CAPTURE(explicit_spec);
    auto run = [&](const std::string& spec) {
      MemorySource source(trace);
      return replay_simulated(source, PolicySpec::parse(spec), SimDeviceConfig{}, {},
                              info.needs_whole_trace ? &trace.events : nullptr);
    };
    ReplayResult plain = run(info.name), given = run(explicit_spec);
    CHECK(given.reserved.bytes == plain.reserved.bytes);
    CHECK(given.allocated.bytes == plain.allocated.bytes);
    CHECK(given.calls.total() == plain.calls.total());
    CHECK(given.final_reserved == plain.final_reserved);
  }
}

TEST_CASE("FreeSlots reuses the most recently freed slot, else appends", "[options]") {
  std::vector<int> records;
  FreeSlots slots;
  CHECK(slots.take(records) == 0);
  CHECK(slots.take(records) == 1);
  CHECK(slots.take(records) == 2);
  slots.give_back(0);
  slots.give_back(2);
  CHECK(slots.size() == 2);
  CHECK(slots.take(records) == 2);
  CHECK(slots.take(records) == 0);
  CHECK(slots.take(records) == 3);
  CHECK(records.size() == 4);
}

}  // namespace
}  // namespace fraglab
