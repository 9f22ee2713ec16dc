// The allocator's memory at one moment of a replay, segment by segment: what `fraglab
// diagnose` reads and draws.
//
// Built from the engine's live blocks and the device's regions (cudaMalloc'd segments and
// reserved virtual ranges), so it works for every policy. Segment kinds follow the policy
// when it is `pytorch` (PyTorch's own classes: small-pool 2 MiB segments, large ones,
// oversize ones at or past max_split_size, expandable ranges); other policies' regions are
// "segment" or "virtual range".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/stepped_replay.h"

namespace fraglab {

struct StateBlock {
  Addr addr = 0;
  uint64_t size = 0, requested = 0;
  uint64_t alloc_index = 0;  // the alloc event (its stack, time and age)
  StreamIndex stream = 0;
  uint32_t segment = 0;           // index into MemoryState::segments
  bool awaiting_streams = false;  // freed by the program, held until other streams are done (record_stream)
};

struct FreeRange {
  Addr addr = 0;
  uint64_t size = 0;
};

struct StateSegment {
  Addr addr = 0;
  uint64_t size = 0;    // address span
  uint64_t mapped = 0;  // physical bytes inside it (= size for a cudaMalloc'd segment)
  std::string kind;     // "small", "large", "oversize", "expandable"; "segment", "virtual range"
  std::string pool;     // PyTorch's pool ("small", "large"; "unknown" for an empty expandable range), after a private
                        // pool's id ("(1, 0) large") for a CUDA graph's or MemPool's; "" for other policies
  std::optional<StreamIndex> stream;
  uint64_t allocated = 0;  // live block bytes
  uint64_t free_bytes = 0, largest_free = 0;
  std::vector<uint32_t> blocks;  // indices into MemoryState::blocks, by address
  std::vector<FreeRange> free_ranges;
};

struct MemoryState {
  uint64_t event_index = 0;  // the state just before this event
  uint64_t reserved = 0, allocated = 0, requested = 0;
  uint64_t free_bytes = 0, largest_free = 0;
  // Bytes of live blocks awaiting other streams (StateBlock::awaiting_streams), inside `allocated` here as
  // the replayed policy holds them; PyTorch's allocated_bytes leaves them out.
  uint64_t awaiting_streams = 0;
  std::vector<StateSegment> segments;  // by address
  std::vector<StateBlock> blocks;      // by address
};

// The state of `replay` now (just before replay.position()).
MemoryState capture_state(const SteppedReplay& replay, const PolicySpec& spec);

}  // namespace fraglab
