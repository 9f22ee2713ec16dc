// The bundled recordings' side files (tests/data/snapshots/**/stats.jsonl: PyTorch's counters by file) and the
// recorded peak a trace shows, for the tests that check recordings against them.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "traces/trace_io.h"
#include "traces/trace_stats.h"

namespace fraglab::test {

// One stats.jsonl, by its lines' "file".
inline std::map<std::string, nlohmann::json> read_stats_jsonl(const std::string& path) {
  std::map<std::string, nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) {
      auto j = nlohmann::json::parse(line);
      out[j.at("file").get<std::string>()] = j;
    }
  return out;
}

// The stats.jsonl of a folder of recordings.
inline std::map<std::string, nlohmann::json> snapshot_stats(const std::string& dir) {
  return read_stats_jsonl(dir + "/stats.jsonl");
}

// The recording allocator's peak reserved bytes over the trace (TraceStats::recorded_peak_reserved).
inline uint64_t recorded_peak(const Trace& trace) {
  MemorySource source(trace);
  return compute_stats(source).recorded_peak_reserved;
}

}  // namespace fraglab::test
