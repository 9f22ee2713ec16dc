#include "report/memory_state.h"

#include <algorithm>

#include "allocators/pytorch/caching_allocator.h"
#include "allocators/pytorch/config.h"

namespace fraglab {

namespace {

// PyTorch's max_split_size for the policy string as `pytorch` would build it: the recorded
// settings (unless recorded_settings=false), then the string's own keys.
uint64_t pytorch_max_split_size(const PolicySpec& spec, const TraceMeta& meta) {
  detail::PytorchAllocatorConfig config;
  if (spec.options.get(detail::kRecordedSettings)) config.apply_recorded(meta.allocator_settings);
  if (spec.options.has("max_split_size_mb"))
    config.apply("max_split_size_mb:" + spec.options.get_string("max_split_size_mb", ""));
  return config.max_split_size;
}

// PyTorch's segment classes (CUDACachingAllocator.cpp get_allocation_size, get_pool): a
// 2 MiB cudaMalloc segment is the small pool's; blocks at or past max_split_size are
// "oversize" (never split, freed first on a retry); a virtual range is an expandable segment.
void classify_pytorch(StateSegment& s, const std::vector<StateBlock>& blocks, uint64_t max_split_size) {
  if (s.kind == "virtual range") {
    s.kind = "expandable";
    // One expandable segment serves one pool; its live blocks tell which (small ones are at most 1 MiB).
    if (s.blocks.empty())
      s.pool = "unknown";
    else
      s.pool = blocks[s.blocks.front()].size <= detail::kSmallSize ? "small" : "large";
    return;
  }
  if (s.size == detail::kSmallBuffer)
    s.kind = s.pool = "small";
  else
    s.kind = s.size >= max_split_size ? "oversize" : "large", s.pool = "large";
}

}  // namespace

MemoryState capture_state(const SteppedReplay& replay, const PolicySpec& spec) {
  const ReplayEngine& engine = replay.engine();
  const TrackingDevice& device = replay.device();
  MemoryState st;
  st.event_index = replay.position();
  st.reserved = device.reserved_bytes();
  st.allocated = engine.allocated_live();
  st.requested = engine.requested_live();
  for (const DeviceRegion& r : device.regions()) {
    StateSegment s;
    s.addr = r.addr;
    s.size = r.size;
    s.kind = r.is_vmm ? "virtual range" : "segment";
    s.stream = replay.streams().stream_at(r.addr);
    st.segments.push_back(std::move(s));
  }
  auto segment_of = [&](Addr addr) -> uint32_t {
    auto it = std::upper_bound(st.segments.begin(), st.segments.end(), addr,
                               [](Addr a, const StateSegment& s) { return a < s.addr; });
    return it == st.segments.begin() ? 0 : static_cast<uint32_t>(it - st.segments.begin() - 1);
  };
  const auto& records = engine.blocks();
  for (AllocId id = 0; id < records.size(); ++id) {
    const BlockRecord& b = records[id];
    if (!b.live) continue;
    const bool awaiting = replay.awaiting_streams(id);
    st.blocks.push_back({b.addr, b.size, b.requested, b.alloc_index, b.stream, 0, awaiting});
    if (awaiting) st.awaiting_streams += b.size;
  }
  std::sort(st.blocks.begin(), st.blocks.end(),
            [](const StateBlock& a, const StateBlock& b) { return a.addr < b.addr; });
  for (uint32_t i = 0; i < st.blocks.size(); ++i) {
    StateBlock& b = st.blocks[i];
    b.segment = segment_of(b.addr);
    if (st.segments.empty()) continue;
    st.segments[b.segment].blocks.push_back(i);
    st.segments[b.segment].allocated += b.size;
  }
  // Free ranges: physical memory not covered by a live block, walked in address order.
  size_t next_block = 0;
  for (const auto& [start, length] : device.physical()) {
    Addr at = start, end = start + length;
    auto emit = [&](Addr from, Addr to) {
      while (from < to) {  // a physical interval can span adjacent segments: cut at their ends
        StateSegment& s = st.segments[segment_of(from)];
        Addr stop = std::min(to, std::max(from + 1, s.addr + s.size));
        s.free_ranges.push_back({from, stop - from});
        s.free_bytes += stop - from;
        s.largest_free = std::max(s.largest_free, stop - from);
        from = stop;
      }
    };
    while (next_block < st.blocks.size() && st.blocks[next_block].addr + st.blocks[next_block].size <= at) ++next_block;
    for (; next_block < st.blocks.size() && st.blocks[next_block].addr < end; ++next_block) {
      const StateBlock& b = st.blocks[next_block];
      if (b.addr > at) emit(at, b.addr);
      at = std::max(at, b.addr + b.size);
    }
    if (at < end) emit(at, end);
    if (!st.segments.empty())
      for (Addr a = start; a < end;) {  // mapped bytes per segment
        StateSegment& s = st.segments[segment_of(a)];
        Addr stop = std::min(end, std::max(a + 1, s.addr + s.size));
        s.mapped += stop - a;
        a = stop;
      }
  }
  uint64_t max_split = spec.name == "pytorch" ? pytorch_max_split_size(spec, replay.trace().meta) : 0;
  for (StateSegment& s : st.segments) {
    st.free_bytes += s.free_bytes;
    st.largest_free = std::max(st.largest_free, s.largest_free);
    if (spec.name == "pytorch") classify_pytorch(s, st.blocks, max_split);
  }
  // A CUDA graph's or MemPool's private pool: named before the pool kind ("(1, 0) large").
  const auto& pools = replay.trace().meta.pools;
  if (pools.size() > 1)
    for (StateSegment& s : st.segments)
      if (PoolIndex p = replay.streams().pool_at(s.addr); p && p < pools.size() && !s.pool.empty())
        s.pool = pool_name(pools[p]) + " " + s.pool;
  return st;
}

}  // namespace fraglab
