// Trace I/O speed: PyTorch snapshot import (MB/s of the file as stored, events/s) and the
// native format's write and read (events/s). Pass large recordings through FRAGLAB_BENCH_TRACES
// (e.g. a 2.4M-entry gpt2 generation snapshot, or tests/tools/scale_snapshot.py's 1 GB stand-in);
// bench/snapshot_import.py measures the issue-20 targets (against Python, resident memory).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "bench/bench_common.h"
#include "import/trace_import.h"
#include "traces/trace_io.h"

namespace fraglab::bench {
namespace {

namespace fs = std::filesystem;

void import_trace(benchmark::State& state, const std::string& path) {
  const auto bytes = static_cast<int64_t>(fs::file_size(path));
  int64_t events = 0;
  for (auto _ : state) {
    Trace t = load_trace(path);
    events += static_cast<int64_t>(t.events.size());
    benchmark::DoNotOptimize(t.events.data());
  }
  state.SetBytesProcessed(bytes * state.iterations());
  state.SetItemsProcessed(events);
}

std::string scratch_path(const std::string& name) {
  return (fs::temp_directory_path() / ("fraglab-bench-" + std::to_string(getpid()) + "-" + name + ".fltrace")).string();
}

void native_write(benchmark::State& state, const BenchTrace& bt) {
  const std::string path = scratch_path(bt.name);
  for (auto _ : state) save_trace(bt.trace, path, TraceFormat::Native);
  state.SetItemsProcessed(static_cast<int64_t>(bt.trace.events.size()) * state.iterations());
  state.counters["file_MB"] = static_cast<double>(fs::file_size(path)) / 1e6;
  fs::remove(path);
}

void native_read(benchmark::State& state, const BenchTrace& bt) {
  const std::string path = scratch_path(bt.name);
  save_trace(bt.trace, path, TraceFormat::Native);
  for (auto _ : state) {
    auto source = open_trace(path);
    std::vector<Event> buffer(1 << 16);
    size_t n, total = 0;
    while ((n = source->read(buffer.data(), buffer.size())) > 0) total += n;
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed(static_cast<int64_t>(bt.trace.events.size()) * state.iterations());
  fs::remove(path);
}

[[maybe_unused]] const bool registered = [] {
  const auto paths = bench_trace_paths();
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string file = fs::path(paths[i]).filename().string();
    benchmark::RegisterBenchmark(("import/" + file).c_str(),
                                 [p = paths[i]](benchmark::State& s) { import_trace(s, p); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("native_write/" + file).c_str(),
                                 [i](benchmark::State& s) { native_write(s, bench_traces()[i]); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("native_read/" + file).c_str(),
                                 [i](benchmark::State& s) { native_read(s, bench_traces()[i]); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
}  // namespace fraglab::bench
