// Shared set-up for fraglab's benchmarks: which traces to run on, loaded once.
//
// Traces: every bundled snapshot in traces/corpus (or only the smallest with
// FRAGLAB_BENCH_SMOKE=1, for CI's smoke run), plus any files listed in
// FRAGLAB_BENCH_TRACES (colon-separated), e.g. a generated 10M-event trace.
#pragma once

#include <string>
#include <vector>

#include "traces/trace.h"

namespace fraglab::bench {

struct BenchTrace {
  std::string name;  // file name without directory
  std::string path;
  Trace trace;  // loaded once, replayed many times
};

bool smoke_mode();
std::vector<std::string> bench_trace_paths();
// Loaded lazily and kept for the process's lifetime.
const std::vector<BenchTrace>& bench_traces();

}  // namespace fraglab::bench
