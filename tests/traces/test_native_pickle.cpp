// Acceptance (issue 2): a real PyTorch snapshot survives pickle -> native -> JSON Lines ->
// native with every event identical, stacks and streams included.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "import/trace_import.h"
#include "traces/trace_io.h"

using namespace fraglab;
namespace fs = std::filesystem;

TEST_CASE("native: pickle -> native -> JSON Lines -> native keeps every event", "[native]") {
  const fs::path dir = fs::temp_directory_path() / ("fraglab_native_pickle_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* name : {"gpt2_train.default.pickle.gz", "gpt2_train.default.stacks.pickle.gz"}) {
    INFO(name);
    Trace original = load_trace(std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/" + name);
    REQUIRE(original.events.size() > 20000);
    const std::string a = (dir / "a.fltrace").string(), b = (dir / "b.jsonl").string(),
                      c = (dir / "c.fltrace").string();
    save_trace(original, a);
    Trace native = load_trace(a);
    save_trace(native, b);
    Trace jsonl = load_trace(b);
    save_trace(jsonl, c);
    Trace back = load_trace(c);
    CHECK(native.events == original.events);
    CHECK(jsonl.events == original.events);
    CHECK(back.events == original.events);
    CHECK(back.meta.streams == original.meta.streams);
    CHECK(back.meta.stacks == original.meta.stacks);
    CHECK(back.meta.allocator_settings == original.meta.allocator_settings);
    CHECK(back.meta.dropped_unknown_frees == original.meta.dropped_unknown_frees);
  }
  fs::remove_all(dir);
}
