// Private pools (CUDA graphs' and torch.cuda.MemPool's, and the default pools), as PyTorch's MemoryViz
// lists them in its segment views: at the cursor, each pool's segments, reserved, allocated and free
// bytes; over the whole trace, each pool's peak reserved bytes and when.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gui/model/policy_run.h"
#include "gui/model/segment_timeline.h"

namespace fraglab::gui {

struct PoolUsage {
  PoolIndex pool = 0;
  std::string name, origin, traits;  // pool_name, pool_origin, pool_traits (traces/trace.h)
  // At the cursor (the lane's snapshot).
  uint64_t segments = 0, reserved = 0, blocks = 0, allocated = 0, requested = 0, free_bytes = 0;
  // Over the trace (the recorded segment spans).
  uint64_t peak_reserved = 0, peak_event = 0;
  uint64_t allocations = 0, bytes_allocated = 0;  // allocations the trace sent to the pool
};

// One row a pool of the trace (the default pools first). A region's pool is the snapshot's
// region_pools (the recorded lane), else the pool of the blocks found in it.
std::vector<PoolUsage> pool_usage(const TraceInfo& info, const CursorSnapshot& snap,
                                  const std::vector<SegmentSpan>& spans);

}  // namespace fraglab::gui
