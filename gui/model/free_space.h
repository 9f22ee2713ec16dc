// The free space inside reserved memory at one moment, computed by one function for every view that
// shows it (the fragmentation panel of every lane, recorded or replayed, and the OOM view's diagnoses),
// so free-in-reserved, rounding waste and free ranges agree wherever they are shown. Free ranges are the
// gaps between live blocks in backed memory, cut at each segment's ends: PyTorch never merges the free
// blocks of two segments, even where cudaMalloc placed them next to each other.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "gui/model/policy_run.h"
#include "report/memory_state.h"
#include "sim/metrics.h"

namespace fraglab::gui {

struct FreeSpace {
  Fragmentation frag;           // reserved, allocated, requested, free bytes, largest free range, free ranges
  std::vector<uint64_t> sizes;  // each free range's bytes, address order
  // Bytes of blocks freed by the program and held until other streams are done (the recorded lane):
  // out of frag.allocated (allocated_bytes), in frag.requested (requested_bytes drops at free_completed),
  // not free either. Rounding waste is then frag.allocated + awaiting_streams - frag.requested.
  uint64_t awaiting_streams = 0;
};

using Interval = std::pair<Addr, uint64_t>;  // (address, bytes)

// `segments`: address spans (segments, reserved virtual ranges) in address order; `physical`: backed
// intervals in address order; `blocks`: live blocks (address, block bytes), any order.
FreeSpace measure_free_space(const std::vector<Interval>& segments, const std::vector<Interval>& physical,
                             std::vector<Interval> blocks, uint64_t allocated, uint64_t requested,
                             uint64_t event_index);
// A lane's snapshot at the cursor (its regions, backed intervals and blocks).
FreeSpace free_space(const CursorSnapshot& snap);
// A diagnosis's state (report/memory_state.h): each segment's backed memory is its blocks and free ranges.
FreeSpace free_space(const MemoryState& state);

}  // namespace fraglab::gui
