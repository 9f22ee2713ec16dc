// PytorchCachingAllocator: a model of one device's DeviceCachingAllocator from PyTorch
// 2.11's c10/cuda/CUDACachingAllocator.cpp, on fraglab's Device interface.
//
// Modelled (function names are the source's): round_size with roundup_power2_divisions;
// get_pool (small <= 1 MiB, large), get_allocation_size (2 MiB / 20 MiB / 2 MiB-rounded
// segments); get_free_block (best fit in (stream, size, address) order, the
// max_split_size oversize rules, the expandable-size look-ahead); should_split and
// alloc_found_block; free_block with try_merge_blocks; alloc_block with the
// set_per_process_memory_fraction limit; malloc's recovery sequence
// (garbage_collect_cached_blocks, release_available_cached_blocks, release_cached_blocks,
// retry, out of memory); release_blocks / emptyCache; expandable segments
// (find_expandable_block, map_block, try_allocate_expandable_block, unmap_block,
// release_expandable_segment) over the device's reserve_range / map_pages / unmap_pages.
//
// Private pools (CUDA graphs, torch.cuda.MemPool): each trace pool other than 0 is a PrivatePool with
// its own small and large BlockPools (and its own expandable segments); requests name their pool (the
// trace's Event::pool, standing for get_pool's captures_underway lookup); release_pool is releasePool
// bringing the use count to 0 (graph_pools_freeable); release_cached_blocks returns the default pools'
// and then every freeable pool's cached segments, dropping a pool once it holds none; malloc's last
// resort (release_cached_blocks) is skipped for a private pool's request, as PyTorch skips it while a
// capture or use_mem_pool is underway.
//
// MemPool's arguments (PyTorch 2.11's MemPool(allocator, use_on_oom, no_split); the trace's PoolInfo):
// a pool with an allocator of its own never gets expandable segments (malloc's
// is_expandable_segments_active is off for an active user pool; alloc_block's allocPrimitive is a device
// segment call like cudaMalloc, and should_split / get_free_block use the cudaMalloc rules for it);
// no_split_pools: should_split is false for the pool's blocks; use_on_oom_pools: try_mempool_fallback,
// after the first alloc_block fails, serves a default request from an opted-in pool's cached block by
// get_free_block with expandable segments off. A MemPool's release (~MemPool: releasePool, then
// emptyCache of its id) returns that pool's cached segments at once.
//
// Not modelled: IPC sharing, the order among several use_on_oom pools (the source's hash set), free-memory
// callbacks (none are registered in a plain process), and the cross-stream events themselves: the
// trace's free_completed tells when a block with record_stream uses becomes reusable, so
// the caller hands the free in at that point. A consequence: frees that PyTorch completes
// inside release_cached_blocks (synchronize_and_free_events) arrive at their recorded
// position, which is where the trace has them anyway.
//
// Blocks live in a vector and are named by index (the handle the replay engine gives
// back); the free sets hold (stream rank, size, address, index) keys, so comparisons
// touch no block memory.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "allocators/detail/ordered_keys.h"
#include "allocators/pytorch/config.h"
#include "device/device.h"
#include "traces/free_slots.h"

namespace fraglab::detail {

// The source's constants (CUDACachingAllocator.cpp / CachingDeviceAllocator.h).
constexpr uint64_t kMinBlockSize = 512;         // every size rounds to a multiple, at least 512
constexpr uint64_t kSmallSize = 1 * kMiB;       // largest "small" request
constexpr uint64_t kSmallBuffer = 2 * kMiB;     // small-pool segment size
constexpr uint64_t kMinLargeAlloc = 10 * kMiB;  // requests 1..10 MiB share 20 MiB segments
constexpr uint64_t kLargeBuffer = 20 * kMiB;
constexpr uint64_t kRoundLarge = 2 * kMiB;  // larger segments round to this
// cudaDeviceProp::totalGlobalMem of the GPU the bundled recordings were made on (NVIDIA H100 80GB
// HBM3): the default GPU memory, which sizes expandable segments' ranges and memory fractions.
constexpr uint64_t kH100TotalMemory = 85017493504ull;

// Trace positions at which a capture (or use_mem_pool) was underway for another stream: inside one of
// `inside`, or, for a recorded OOM, inside one of `after` (past a capture's last request, where its end is
// not shown). Both sorted, disjoint, open intervals.
struct CaptureWindows {
  std::vector<std::pair<uint64_t, uint64_t>> inside;
  std::vector<std::pair<uint64_t, uint64_t>> after;
};

// round_size(): what a request of `size` bytes occupies.
uint64_t pytorch_round_size(uint64_t size, const PytorchAllocatorConfig& config);
// roundup_power2_next_division()
uint64_t pytorch_roundup_power2_next_division(uint64_t size, uint64_t divisions);
// get_allocation_size(): the segment size cudaMalloc'd for a (rounded) request; requests of 1 to 10 MiB
// get the large segment size (large_segment_size_mb, kLargeBuffer by default).
uint64_t pytorch_allocation_size(uint64_t size, uint64_t large_segment_size = kLargeBuffer);

// How a limit on the device's memory stops the allocator.
enum class PytorchLimit {
  // set_per_process_memory_fraction: alloc_block refuses a segment that would pass the limit before
  // asking the driver (expandable segments included: the whole get_allocation_size() is checked, not
  // the pages mapped), and garbage_collection_threshold is active.
  Fraction,
  // The GPU's own memory: cudaMalloc or cuMemCreate fails (the device refuses the call); no fraction is
  // set, so the garbage collector never runs.
  Gpu,
};
// Whether a recording's OOMs were the GPU's own: an `oom` entry whose recorded free device memory
// (cudaMemGetInfo) was below the segment the request needed, so cudaMalloc failed. Under a memory
// fraction the GPU still has room (the fraction refused first).
bool pytorch_oom_was_gpus(const Event& oom, uint64_t large_segment_size = kLargeBuffer);

// The counters of torch.cuda.memory_stats() the model keeps.
struct PytorchStats {
  uint64_t reserved = 0, reserved_peak = 0;    // reserved_bytes.all
  uint64_t allocated = 0, allocated_peak = 0;  // allocated_bytes.all
  uint64_t num_alloc_retries = 0, num_ooms = 0;
  uint64_t num_device_alloc = 0, num_device_free = 0;  // cudaMalloc + map, cudaFree + unmap
  uint64_t segments = 0, segments_peak = 0;            // segment.all (cudaMalloc'd segments)
};

// Two to a cache line: whether it is allocated or mapped, and its gc_count base, are kept apart
// (PytorchCachingAllocator's flags_ and gc_count_base_).
struct PytorchBlock {
  Addr addr = 0;
  uint64_t size = 0;
  uint32_t prev = kNoNode, next = kNoNode;  // neighbours within the segment
  uint32_t segment = kNoNode;               // expandable segment index; kNoNode = a cudaMalloc segment
  StreamIndex stream = 0;
  uint16_t pool = 0;  // owning BlockPool: index into the allocator's pools (its `small` says which kind)
  bool is_split() const { return prev != kNoNode || next != kNoNode; }
};
static_assert(sizeof(PytorchBlock) == 32);

class PytorchCachingAllocator {
 public:
  // `streams`: the stream handles (cudaStream_t values) by StreamIndex; pools order blocks
  // by them as PyTorch does. `total_memory`: the GPU's memory (cudaDeviceProp totalGlobalMem),
  // which sizes expandable segments' address ranges. A device capacity models
  // set_per_process_memory_fraction: allowed_memory_maximum = capacity.
  // `limit`: what the device's capacity stands for.
  // `pools`: the trace's pools (TraceMeta::pools; index 0 the default pools), by which an initial state's
  // segments name their pool, with the MemPool arguments inferred for each (PoolInfo).
  PytorchCachingAllocator(Device& device, PytorchAllocatorConfig config, std::vector<uint64_t> streams,
                          uint64_t total_memory, std::vector<PoolInfo> pools = {},
                          PytorchLimit limit = PytorchLimit::Fraction);

  // DeviceCachingAllocator::malloc into the default pools (pool 0) or private pool `pool`; nullopt =
  // out of memory (after recovery). Returns the block index.
  std::optional<uint32_t> malloc(uint64_t orig_size, StreamIndex stream, PoolIndex pool = 0) {
    // Inline, so that the caller's test of the result keeps it in registers: returned from an
    // out-of-line call, GCC builds the optional with two narrow stores and reads it back with one
    // wide load, a store-forwarding stall on every request.
    const uint32_t b = malloc_block(orig_size, stream, pool);
    if (b == kNoNode) return std::nullopt;
    return b;
  }
  // Where requests were made while a capture or use_mem_pool was underway for another stream or thread
  // (read from the trace by the pytorch policy): for them too malloc skips release_cached_blocks.
  void set_capture_windows(CaptureWindows windows) { capture_windows_ = std::move(windows); }
  // Where the program ran under the other expandable_segments setting (TraceMeta::expandable_flipped, as
  // trace positions): malloc reads the setting at each request (CUDAAllocatorConfig::expandable_segments()).
  void set_expandable_flips(std::vector<std::pair<uint64_t, uint64_t>> windows) {
    expandable_flips_ = std::move(windows);
  }
  // The limit along the trace where one does not explain it (detail::limit_drift: trace positions and
  // offsets from the capacity): the fraction's check, or a cudaMalloc at the GPU's limit, fails past it.
  void set_limit_drift(std::vector<std::pair<uint64_t, int64_t>> steps) {
    limit_drift_ = std::move(steps);
    limit_raised_ = std::any_of(limit_drift_.begin(), limit_drift_.end(), [](const auto& s) { return s.second > 0; });
  }
  // The trace position of the request malloc serves next, and whether it is a recorded OOM tried again
  // (checked only where malloc's last resort is near).
  void set_request(uint64_t index, bool recorded_oom) {
    request_index_ = index;
    request_is_recorded_oom_ = recorded_oom;
  }
  // free() of a block without pending stream uses (free_block).
  void free(uint32_t block);
  // emptyCache(): release_cached_blocks with the default MempoolId.
  void empty_cache();
  // releasePool(): the pool's use count reached 0, its cached segments become releasable. A MemPool's
  // (PoolInfo::empties_on_release) are released at once: ~MemPool calls emptyCache(id) right after.
  void release_pool(PoolIndex pool);
  // Recreates the recording allocator's state at a trace's first event: its segments and expandable
  // ranges through the device, the live blocks where they were, the space between them as cached free
  // blocks. Returns the live blocks' indices in the state's order, or nullopt when the device refuses
  // the memory (a capacity below what was reserved then).
  std::optional<std::vector<uint32_t>> adopt(const InitialState& state);

  const PytorchBlock& block(uint32_t i) const { return blocks_[i]; }
  bool allocated(uint32_t b) const { return flags_[b] & kAllocated; }
  // false: unmapped address space of an expandable segment
  bool mapped(uint32_t b) const { return flags_[b] & kMapped; }
  const PytorchStats& stats() const { return stats_; }
  // The model checks the limit itself, and the device must not refuse before it (Policy::enforces_capacity):
  // under set_per_process_memory_fraction (PytorchLimit::Fraction with a capacity), as PyTorch does, and where the
  // GPU's limit followed along the trace rises above the device's capacity (the least limit the OOMs show) before the
  // driver took more memory.
  bool enforces_limit() const { return set_fraction_ || limit_raised_; }
  const PytorchAllocatorConfig& config() const { return config_; }
  // Free blocks cached in the pools (mapped ones), for tests.
  size_t cached_blocks() const {
    size_t n = 0;
    for (const Pool& p : pools_) n += p.blocks.size();
    return n;
  }
  // Whether private pool `pool` exists (has been used and not dropped), for tests.
  bool has_private_pool(PoolIndex pool) const { return pool < private_.size() && private_[pool].live; }

 private:
  // BlockComparatorSize's (stream, size, address) in 16 bytes: hi = stream rank << 48 | size
  // (the unmapped set, ordered by (stream, address), uses size 0); lo = the address in
  // 512-byte units << 25 | block index, which orders as the address does (addresses are
  // unique and 512-aligned) and carries the block along. OrderedKeys (ordered_keys.h) keeps
  // the pools' exact order without moving the whole pool per insert and erase.
  static constexpr int kNodeBits = 25;
  struct Key {
    uint64_t hi;
    uint64_t lo;
    uint32_t node() const { return static_cast<uint32_t>(lo & ((1u << kNodeBits) - 1)); }
  };
  struct Pool {
    bool small;
    uint16_t index;   // its place in pools_
    PoolIndex owner;  // 0: the default pools; else the private pool it belongs to
    // malloc's is_expandable_segments_active for its requests: expandable_segments, unless the pool's
    // MemPool has an allocator of its own (then its segments are the allocator's raw_alloc).
    bool expandable = false;
    bool own_allocator = false;   // a MemPool's allocator of its own: never expandable, whatever the setting
    bool no_split = false;        // setNoSplit: should_split is false for its blocks
    OrderedKeys<Key> blocks{};    // free mapped blocks: (stream, size, address)
    OrderedKeys<Key> unmapped{};  // unmapped expandable ranges: (stream, address)
    int64_t get_free_blocks_call_count = 0;
  };
  // PrivatePool: its BlockPools are pools_[2k] (large) and pools_[2k + 1] (small).
  struct PrivatePool {
    bool live = false;          // in graph_pools
    bool freeable = false;      // in graph_pools_freeable
    int64_t device_allocs = 0;  // cudaMalloc_count: segments (and mapped ranges) not yet given back
  };
  struct ExpandableSegment {
    Addr base = 0;
    uint64_t segment_size = 0;  // page size: 2 MiB small pool, 20 MiB large pool
    uint64_t max_handles = 0;
    StreamIndex stream = 0;
    bool live = false;
    uint64_t size() const { return segment_size * max_handles; }
  };
  struct Params {
    uint64_t size;  // rounded
    StreamIndex stream;
    Pool* pool;
    uint64_t alloc_size;
    bool expandable;  // AllocParams::is_expandable_segments_active
    uint32_t block = kNoNode;
    bool block_in_pool = false;             // found by get_free_block, still in the pool's set
    uint64_t found_size = 0;                // its size then (read from its key, not from the block)
    OrderedKeys<Key>::iterator position{};  // its place there
  };

  // blocks
  static constexpr uint8_t kAllocated = 1, kMapped = 2;
  void set_allocated(uint32_t b, bool on) {
    flags_[b] = static_cast<uint8_t>((flags_[b] & ~kAllocated) | (on ? kAllocated : 0));
  }
  void set_mapped(uint32_t b, bool on) {
    flags_[b] = static_cast<uint8_t>((flags_[b] & ~kMapped) | (on ? kMapped : 0));
  }
  void stamp_gc_count(uint32_t b, const Pool& pool);
  uint32_t new_block(Addr addr, uint64_t size, StreamIndex stream, uint16_t pool);
  void delete_block(uint32_t b) { unused_.give_back(b); }
  Pool& pool_at(size_t i) { return *pool_index_[i]; }
  const Pool& pool_at(size_t i) const { return *pool_index_[i]; }
  Pool& pool_of(uint32_t b) { return pool_at(blocks_[b].pool); }
  void add_pool(Pool pool) { pool_index_.push_back(&pools_.emplace_back(std::move(pool))); }
  Pool& pool_for(PoolIndex owner, bool small);  // get_pool's choice, creating a private pool's BlockPools
  Params params_for(uint64_t size, StreamIndex stream, PoolIndex pool);
  PoolIndex pool_index_of(const std::array<int64_t, 2>& id) const;
  void count_device_alloc(const Pool& pool, int64_t delta);
  Key size_key(uint32_t b) const;
  Key address_key(uint32_t b) const;
  void insert_into_blocks(uint32_t b);
  void replace_in_blocks(const Key& old, uint32_t b);
  void erase_from_blocks(uint32_t b);
  uint64_t gc_count(uint32_t b);

  // malloc steps
  uint32_t malloc_block(uint64_t orig_size, StreamIndex stream, PoolIndex pool);  // kNoNode: out of memory
  bool another_capture_underway() const;
  bool expandable_for(const Pool& pool) const;
  int64_t limit_offset() const;
  bool past_limit(uint64_t bytes) const;
  bool get_free_block(Params& p);
  bool should_split(const Params& p) const;
  bool try_mempool_fallback(Params& p);
  uint32_t alloc_found_block(const Params& p, bool split_remainder);
  bool alloc_block(Params& p, bool is_retry);
  void garbage_collect_cached_blocks();
  bool release_available_cached_blocks(const Params& p);
  bool releasable(uint32_t b) const;
  bool release_cached_blocks();
  void release_private_pools();
  void release_private_pool(size_t k);
  void release_blocks(Pool& pool);
  void release_block(uint32_t b);
  size_t try_merge_blocks(uint32_t dst, uint32_t src);
  uint64_t absorb(uint32_t dst, uint32_t src);  // the merge itself; src must be out of its set

  // expandable segments
  uint32_t find_expandable_block(StreamIndex stream, Pool& pool, uint64_t size);
  bool map_block(uint32_t to_map, uint64_t size);
  uint32_t try_allocate_expandable_block(StreamIndex stream, Pool& pool, uint64_t size);
  void unmap_block(uint32_t b);
  void release_expandable_segment(uint32_t b);

  // adopting an initial state
  struct ExpandableGroup {
    StreamIndex stream;
    bool small;
    PoolIndex pool;
    uint32_t segment;    // into segments_
    Addr recorded_base;  // the recording's address of the segment's start
    std::vector<const RecordedSegment*> ranges;
  };
  bool adopt_expandable(const ExpandableGroup& g, std::vector<std::pair<Addr, uint32_t>>& live);
  uint64_t estimate_block_size(uint64_t requested, uint64_t room, bool small, bool expandable) const;
  uint32_t lay_out(const RecordedSegment& seg, Addr base, uint32_t segment, uint32_t prev,
                   std::vector<std::pair<Addr, uint32_t>>& live);
  uint32_t chain(uint32_t prev, uint32_t b);

  void grow_reserved(uint64_t bytes);
  void shrink_reserved(uint64_t bytes);

  Device& device_;
  PytorchAllocatorConfig config_;
  std::vector<uint64_t> stream_rank_;  // by StreamIndex: rank of its handle among all handles
  uint64_t total_memory_;
  bool set_fraction_ = false;
  bool gc_on_ = false;  // set_fraction_ and a garbage_collection_threshold: the get_free_block count and GC run
  uint64_t allowed_memory_maximum_ = 0;
  uint64_t total_allocated_memory_ = 0;
  std::vector<PoolInfo> pool_infos_;
  std::vector<PoolIndex> use_on_oom_;  // use_on_oom_pools, in pool order
  std::deque<Pool> pools_;             // [0] default large, [1] default small, then each private pool's pair
  std::vector<Pool*> pool_index_;      // pools_ by index: a deque's own indexing costs a division per lookup
  std::vector<PrivatePool> private_;   // by PoolIndex; [0] unused (the default pools)
  std::vector<PytorchBlock> blocks_;
  // By block, kAllocated | kMapped, apart from blocks_: free() tests both neighbours on every call,
  // and this array stays in L1 where the blocks do not, so the branch (a coin toss to a predictor)
  // resolves without waiting on a cache miss.
  std::vector<uint8_t> flags_;
  std::vector<int64_t> gc_count_base_;  // by block; kept only while gc_on_, the one time gc_count reads it
  FreeSlots unused_;
  std::vector<ExpandableSegment> segments_;
  PytorchStats stats_;
  // Read only near malloc's last resort; last, so that the members every request touches keep their lines.
  CaptureWindows capture_windows_;
  std::vector<std::pair<uint64_t, uint64_t>> expandable_flips_;
  std::vector<std::pair<uint64_t, int64_t>> limit_drift_;
  bool limit_raised_ = false;  // a step of limit_drift_ lies above the capacity
  uint64_t request_index_ = 0;
  bool request_is_recorded_oom_ = false;
};

}  // namespace fraglab::detail
