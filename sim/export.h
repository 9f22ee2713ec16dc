// Exporting a replay for other tools: the trace replayed through a policy, with the
// addresses that policy chose, written as
//   - a PyTorch memory snapshot (what torch.cuda.memory._snapshot() returns, pickled as
//     _dump_snapshot() does), which torch/cuda/_memory_viz.py and pytorch.org/memory_viz
//     open: device_traces entries {action, addr, size, stream, time_us, frames, ...} and
//     the final `segments` with their blocks;
//   - a Chrome trace-event JSON (Perfetto, chrome://tracing): counter tracks for
//     requested / allocated / reserved bytes and one async slice per allocation lifetime.
// Both stream their output and write it through AtomicFile (nothing at the path unless
// the export completes).
#pragma once

#include <string>

#include "sim/placed_replay.h"

namespace fraglab {

struct ExportSummary {
  ReplayResult result;
  uint64_t records = 0;  // trace entries (snapshot) or trace events (Perfetto) written
};

// A .gz path is written gzip-compressed.
ExportSummary export_snapshot(const Trace& trace, const PolicySpec& spec, const SimDeviceConfig& config,
                              const std::string& path);
ExportSummary export_perfetto(const Trace& trace, const PolicySpec& spec, const SimDeviceConfig& config,
                              const std::string& path);

}  // namespace fraglab
