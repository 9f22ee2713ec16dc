// PyTorch memory snapshots (torch.cuda.memory._dump_snapshot / _snapshot()), read by
// fraglab's own pickle reader (traces/pickle.h) into the trace model.
//
// The snapshot's device_traces[device] becomes the event stream: alloc, free_requested,
// free_completed (-> Free), segment_alloc/free/map/unmap and oom as reference events.
// Frees of blocks allocated before recording began are dropped and counted; frees
// requested but never completed leave the block live; runs of segment releases that no
// allocation explains become EmptyCache events (torch.cuda.empty_cache()).
#pragma once

#include <string>

#include "traces/trace_io.h"

namespace fraglab {

// `bytes` is the (already decompressed) pickle; `name` names it in errors.
Trace parse_pytorch_snapshot(const std::string& bytes, const std::string& name, const ReadOptions& options);
// Reads .pickle or .pickle.gz.
Trace read_pytorch_snapshot(const std::string& path, const ReadOptions& options);

}  // namespace fraglab
