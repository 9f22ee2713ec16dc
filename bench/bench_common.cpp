#include "bench/bench_common.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "import/trace_import.h"
#include "traces/trace_io.h"

namespace fraglab::bench {

namespace fs = std::filesystem;

bool smoke_mode() {
  const char* v = std::getenv("FRAGLAB_BENCH_SMOKE");
  return v && *v && std::string(v) != "0";
}

std::vector<std::string> bench_trace_paths() {
  std::vector<std::string> paths;
  const fs::path corpus = fs::path(FRAGLAB_SOURCE_DIR) / "traces" / "corpus";
  for (const auto& entry : fs::directory_iterator(corpus)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".pickle.gz")) paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  if (smoke_mode()) {
    // The smallest bundled trace: enough to prove every benchmark still builds and runs.
    auto smallest = std::min_element(paths.begin(), paths.end(),
                                     [](const auto& a, const auto& b) { return fs::file_size(a) < fs::file_size(b); });
    paths = {*smallest};
  }
  if (const char* extra = std::getenv("FRAGLAB_BENCH_TRACES")) {
    std::string list = extra;
    for (size_t start = 0; start <= list.size();) {
      size_t end = list.find(':', start);
      if (end == std::string::npos) end = list.size();
      if (end > start) paths.push_back(list.substr(start, end - start));
      start = end + 1;
    }
  }
  return paths;
}

const std::vector<BenchTrace>& bench_traces() {
  static const std::vector<BenchTrace> traces = [] {
    std::vector<BenchTrace> out;
    for (const auto& path : bench_trace_paths())
      out.push_back({fs::path(path).filename().string(), path, load_trace(path)});
    return out;
  }();
  return traces;
}

}  // namespace fraglab::bench
