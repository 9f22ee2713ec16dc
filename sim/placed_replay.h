// Replay that reports *where* the policy put things: every trace event again, with the
// block address the policy chose instead of the recorded one, interleaved with the
// device calls the policy made (in the order PyTorch's own trace records them:
// segment calls of an allocation before its alloc entry, those of a free after it),
// plus the byte counters after each event and the final segment/block map.
//
// It is what exporters need to write a replayed trace in another tool's format
// (a PyTorch memory snapshot for memory_viz, a Perfetto trace).
#pragma once

#include <functional>

#include "sim/replay.h"

namespace fraglab {

struct PlacedEvent {
  // Alloc, FreeRequested, Free, EmptyCache, SegmentAlloc/Free/Map/Unmap (the policy's own
  // device calls) or Oom (an allocation the policy could not serve; it is skipped).
  Event event;                                          // addr = placed block address / device call address
  uint64_t block_size = 0;                              // Alloc / FreeRequested / Free: the block's bytes
  uint64_t alloc_index = 0;                             // FreeRequested / Free: event index of the block's alloc
  uint64_t event_index = 0;                             // the trace event this belongs to
  uint64_t requested = 0, allocated = 0, reserved = 0;  // live bytes after it
  uint64_t device_free = 0;                             // Oom: capacity left on the device (0 when unlimited)
  // Part of the state at the trace's first entry (a history begun mid-run, or a snapshot without
  // history): the segments the policy adopted or made for it and its live blocks (the prologue).
  bool prologue = false;
};

struct PlacedReplay {
  ReplayResult result;
  // The final state, as a PyTorch snapshot's `segments` describes it: every segment (and
  // every mapped part of a reserved range) with its blocks tiling it exactly.
  std::vector<RecordedSegment> segments;
};

// Replays `trace` through `spec` on a simulated device; allocations that fail are skipped
// (and reported as Oom). `sink` sees each placed event in order.
PlacedReplay replay_placed(const Trace& trace, const PolicySpec& spec, const SimDeviceConfig& config,
                           const std::function<void(const PlacedEvent&)>& sink);

}  // namespace fraglab
