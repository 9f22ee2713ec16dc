// Every input a fuzzer (or a fuzzing session by hand) once crashed a reader with lives in
// tests/data/fuzz-regressions/, named for what it does. Each must now either load or fail
// with a FormatError that names the file; any other exception, a sanitizer report (the
// suite also runs under ASan/UBSan) or an allocation the input never backs is a regression.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "import/trace_import.h"
#include "traces/io/format_error.h"
#include "traces/trace_io.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> regression_inputs() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(FRAGLAB_SOURCE_DIR) / "tests/data/fuzz-regressions"))
    if (entry.is_regular_file() && entry.path().filename() != "README.md") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("fuzz regressions: every saved input loads or fails with a FormatError naming the file", "[fuzz]") {
  auto files = regression_inputs();
  REQUIRE(!files.empty());
  for (const auto& file : files) {
    INFO(file.filename().string());
    try {
      fraglab::Trace trace = fraglab::load_trace(file.string());
      (void)trace;
    } catch (const fraglab::FormatError& e) {
      CHECK(std::string(e.what()).find(file.string()) != std::string::npos);
    }
  }
}

TEST_CASE("fuzz regressions: corrupt size fields are rejected before anything is allocated", "[fuzz]") {
  // Both files once made the native reader allocate what their headers claimed (4 GiB of meta,
  // a block far larger than its frame): now the frame's own content size is checked first.
  const fs::path dir = fs::path(FRAGLAB_SOURCE_DIR) / "tests/data/fuzz-regressions";
  CHECK_THROWS_WITH(fraglab::load_trace((dir / "native-meta-claims-4gib.fltrace").string()),
                    Catch::Contains("meta size 4294967295"));
  CHECK_THROWS_WITH(fraglab::load_trace((dir / "native-block-raw-size-lies.fltrace").string()),
                    Catch::Contains("disagrees with its zstd frame"));
  CHECK_THROWS_WITH(fraglab::load_trace((dir / "jsonl-float-time-overflows.jsonl").string()),
                    Catch::Contains("\"t\" must be an integer"));
}
