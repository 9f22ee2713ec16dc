// Reading a trace as every fraglab command reads it: the format's reader (traces/trace_io.h) with
// PyTorch's allocator model (sim/pool_checker.h) judging what a snapshot's importer infers.
//
// A snapshot's history does not say which pool a block went to, whether a run of segment releases was
// torch.cuda.empty_cache() or malloc's collector, or when expandable_segments was switched; the importer
// reads these by rules, and a replay of PyTorch's allocator settles what the rules only guess. That
// replay lives in sim/, above the readers, so it is passed in explicitly (ReadOptions::model) rather than
// installed in a process-wide hook: this layer is the one place that does so, and a library user who
// includes it reads exactly what the CLI, the GUI and the Python module read.
//
// Layers: traces -> device -> allocators -> sim -> import -> report, cuda, gui -> cli.
#pragma once

#include <memory>
#include <string>

#include "traces/trace.h"
#include "traces/trace_io.h"

namespace fraglab {

// `options` with PyTorch's model as ReadOptions::model (a model already named is kept).
ReadOptions with_pytorch_model(ReadOptions options = {});

// The whole trace in memory (traces/trace_io.h's read_trace, PyTorch's model judging).
Trace load_trace(const std::string& path, const ReadOptions& options = {});
// A streaming reader (traces/trace_io.h's stream_trace, PyTorch's model judging a snapshot).
std::unique_ptr<EventSource> open_trace(const std::string& path, const ReadOptions& options = {});

// A trace read with ReadOptions::defer_pool_check: whether PyTorch's model has still to check its pools,
// and that check (true: the pools stand; false: read it again without deferring). Thread-safe on a
// const trace (a viewer runs it on a worker).
bool pool_check_pending(const Trace& trace);
bool pools_confirmed(const Trace& trace);

}  // namespace fraglab
