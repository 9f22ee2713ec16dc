#include "gui/model/pool_usage.h"

#include <algorithm>
#include <map>

namespace fraglab::gui {

std::vector<PoolUsage> pool_usage(const TraceInfo& info, const CursorSnapshot& snap,
                                  const std::vector<SegmentSpan>& spans) {
  const TraceMeta& meta = info.trace.meta;
  std::vector<PoolUsage> out(meta.pools.size());
  for (size_t p = 0; p < out.size(); ++p) {
    out[p].pool = static_cast<PoolIndex>(p);
    out[p].name = pool_name(meta.pools[p]);
    out[p].origin = pool_origin(meta.pools[p]);
    out[p].traits = pool_traits(meta.pools[p]);
  }
  auto pool_of_block = [&](const SnapshotBlock& b) -> PoolIndex {
    PoolIndex p = b.alloc_index < info.events() ? info.trace.events[b.alloc_index].pool : 0;
    return p < out.size() ? p : 0;
  };
  // Regions at the cursor and the blocks inside them.
  std::vector<PoolIndex> region_pool(snap.regions.size(), 0);
  size_t r = 0;
  for (const SnapshotBlock& b : snap.blocks) {
    while (r < snap.regions.size() && snap.regions[r].addr + snap.regions[r].size <= b.addr) ++r;
    PoolIndex p = pool_of_block(b);
    if (r < snap.regions.size() && snap.regions[r].addr <= b.addr && p != 0) region_pool[r] = p;
    PoolUsage& u = out[p];
    ++u.blocks;
    u.allocated += b.size;
    u.requested += b.requested;
  }
  for (size_t i = 0; i < snap.regions.size(); ++i) {
    PoolIndex p = i < snap.region_pools.size() ? snap.region_pools[i] : region_pool[i];
    p = p < out.size() ? p : 0;
    ++out[p].segments;
  }
  // Backed bytes by the pool of the region they lie in.
  size_t k = 0;
  for (const auto& [addr, size] : snap.physical) {
    while (k < snap.regions.size() && snap.regions[k].addr + snap.regions[k].size <= addr) ++k;
    PoolIndex p = 0;
    if (k < snap.regions.size() && snap.regions[k].addr <= addr)
      p = k < snap.region_pools.size() ? snap.region_pools[k] : region_pool[k];
    out[p < out.size() ? p : 0].reserved += size;
  }
  for (PoolUsage& u : out) u.free_bytes = u.reserved > u.allocated ? u.reserved - u.allocated : 0;
  // Over the trace: each pool's reserved bytes from its spans' starts and ends.
  std::vector<std::map<uint64_t, int64_t>> changes(out.size());
  for (const SegmentSpan& s : spans) {
    PoolIndex p = s.pool < out.size() ? s.pool : 0;
    changes[p][s.begin] += static_cast<int64_t>(s.size);
    if (s.end < info.events()) changes[p][s.end] -= static_cast<int64_t>(s.size);
  }
  for (size_t p = 0; p < out.size(); ++p) {
    int64_t now = 0;
    for (const auto& [event, delta] : changes[p]) {
      now += delta;
      if (now > static_cast<int64_t>(out[p].peak_reserved)) {
        out[p].peak_reserved = static_cast<uint64_t>(now);
        out[p].peak_event = event;
      }
    }
  }
  for (const Event& e : info.trace.events)
    if (e.kind == EventKind::Alloc) {
      PoolUsage& u = out[e.pool < out.size() ? e.pool : 0];
      ++u.allocations;
      u.bytes_allocated += e.size;
    }
  return out;
}

}  // namespace fraglab::gui
