#include "allocators/pytorch/caching_allocator.h"

#include "allocators/pytorch/gpu_memory.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include "traces/formats/pytorch/settings_inference.h"

namespace fraglab::detail {

namespace {

constexpr int kSizeBits = 48;  // (stream rank, size) share one 64-bit key
constexpr uint64_t kSizeMask = (1ull << kSizeBits) - 1;

[[noreturn]] void internal_assert(const std::string& what) {
  // Where PyTorch has TORCH_INTERNAL_ASSERT: the model reached a state PyTorch treats as a bug.
  throw std::logic_error("pytorch model: " + what);
}

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

constexpr int kAddressUnitBits = 9;                                     // blocks are 512-byte aligned
constexpr uint64_t kMaxAddress = 1ull << (64 - 25 + kAddressUnitBits);  // 2^48

uint64_t pack_address(Addr addr, uint32_t node) { return (addr >> kAddressUnitBits) << 25 | node; }

}  // namespace

uint64_t pytorch_roundup_power2_next_division(uint64_t size, uint64_t divisions) {
  if (is_pow2(size)) return size;
  uint64_t power2_floor = std::bit_floor(size);
  uint64_t power2_division = power2_floor >> (63 - std::countl_zero(divisions));
  if (power2_division == 0) return power2_floor << 1;
  uint64_t round_size_floor = size & ~(power2_division - 1);
  return round_size_floor == size ? size : round_size_floor + power2_division;
}

namespace {

// Inlined into malloc, which rounds every request; pytorch_round_size is its name for other callers.
[[gnu::always_inline]] inline uint64_t round_size(uint64_t size, const PytorchAllocatorConfig& config) {
  if (size < kMinBlockSize) return kMinBlockSize;
  uint64_t divisions = config.divisions_for(size);
  if (divisions > 1 && size > kMinBlockSize * divisions) return pytorch_roundup_power2_next_division(size, divisions);
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

}  // namespace

uint64_t pytorch_round_size(uint64_t size, const PytorchAllocatorConfig& config) { return round_size(size, config); }

uint64_t pytorch_allocation_size(uint64_t size, uint64_t large_segment_size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return large_segment_size;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

bool pytorch_oom_was_gpus(const Event& oom, uint64_t large_segment_size) {
  const uint64_t device_free = oom.addr;  // 0: not recorded (PyTorch before 2.1)
  return oom.kind == EventKind::Oom && device_free != 0 &&
         device_free < pytorch_allocation_size(oom.size, large_segment_size);
}

PytorchCachingAllocator::PytorchCachingAllocator(Device& device, PytorchAllocatorConfig config,
                                                 std::vector<uint64_t> streams, uint64_t total_memory,
                                                 std::vector<PoolInfo> pools, PytorchLimit limit)
    : device_(device), config_(config), total_memory_(total_memory), pool_infos_(std::move(pools)) {
  add_pool(Pool{.small = false, .index = 0, .owner = 0, .expandable = config_.expandable_segments});
  add_pool(Pool{.small = true, .index = 1, .owner = 0, .expandable = config_.expandable_segments});
  private_.resize(1);
  // MemPool(use_on_oom=True) pools (setUseOnOOM), tried in pool order: the source keeps them in a hash set,
  // whose order among several such pools is not modelled.
  for (size_t k = 1; k < pool_infos_.size(); ++k)
    if (pool_infos_[k].use_on_oom) use_on_oom_.push_back(static_cast<PoolIndex>(k));
  // Pools order blocks by the cudaStream_t value first: rank the recorded handles.
  std::vector<uint64_t> sorted = streams;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t h : streams)
    stream_rank_.push_back(static_cast<uint64_t>(std::lower_bound(sorted.begin(), sorted.end(), h) - sorted.begin()));
  if (stream_rank_.empty()) stream_rank_.push_back(0);
  // Under PytorchLimit::Gpu the device itself refuses what passes its capacity, as the driver does.
  if (auto cap = device_.capacity(); cap && limit == PytorchLimit::Fraction) {
    set_fraction_ = true;
    allowed_memory_maximum_ = *cap;
  } else if (!cap && config_.per_process_memory_fraction) {
    // setMemoryFraction: allowed_memory_maximum = fraction x the GPU's memory.
    set_fraction_ = true;
    allowed_memory_maximum_ =
        static_cast<uint64_t>(*config_.per_process_memory_fraction * static_cast<double>(total_memory_));
  }
  gc_on_ = set_fraction_ && config_.garbage_collection_threshold > 0.0;
}

// ---- blocks and pools ------------------------------------------------------------------
// The helpers malloc and free call on every request are always_inline: as calls they cost their
// register saves, about a sixth of the model's instructions on bert_varlen_train.

[[gnu::always_inline]] inline uint32_t PytorchCachingAllocator::new_block(Addr addr, uint64_t size, StreamIndex stream,
                                                                          uint16_t pool) {
  uint32_t i = unused_.take(blocks_);
  if (i >> kNodeBits) internal_assert("more than 2^25 blocks at once");
  if (addr % kMinBlockSize || addr + size > kMaxAddress)
    internal_assert("the device gave an address PyTorch's blocks cannot have (not 512-aligned or past 2^48)");
  if (flags_.size() < blocks_.size()) flags_.resize(blocks_.size());
  flags_[i] = kMapped;
  PytorchBlock& b = blocks_[i];
  b = PytorchBlock{};
  b.addr = addr;
  b.size = size;
  b.stream = stream;
  b.pool = pool;
  return i;
}

PytorchCachingAllocator::Pool& PytorchCachingAllocator::pool_for(PoolIndex owner, bool small) {
  if (owner == 0) return pool_at(small ? 1 : 0);
  if (owner >= private_.size()) private_.resize(owner + 1u);
  // create_or_incref_pool: a pool used again after it was released has a new owner.
  private_[owner].live = true;
  private_[owner].freeable = false;
  while (pools_.size() < 2u * owner + 2u) {
    auto index = static_cast<uint16_t>(pools_.size());
    const auto k = static_cast<PoolIndex>(index / 2);
    const PoolInfo info = k < pool_infos_.size() ? pool_infos_[k] : PoolInfo{};
    // A MemPool with its own allocator never gets expandable segments (malloc's active_user_pool).
    add_pool(Pool{.small = index % 2 == 1,
                  .index = index,
                  .owner = k,
                  .expandable = config_.expandable_segments && !info.own_allocator,
                  .own_allocator = info.own_allocator,
                  .no_split = info.no_split});
  }
  return pool_at(2u * owner + (small ? 1u : 0u));
}

PoolIndex PytorchCachingAllocator::pool_index_of(const std::array<int64_t, 2>& id) const {
  for (size_t i = 0; i < pool_infos_.size(); ++i)
    if (pool_infos_[i].id == id) return static_cast<PoolIndex>(i);
  return 0;
}

// cudaMalloc_count: what a private pool still holds of the device.
void PytorchCachingAllocator::count_device_alloc(const Pool& pool, int64_t delta) {
  if (pool.owner) private_[pool.owner].device_allocs += delta;
}

[[gnu::always_inline]] inline PytorchCachingAllocator::Key PytorchCachingAllocator::size_key(uint32_t b) const {
  const PytorchBlock& blk = blocks_[b];
  if (blk.size > kSizeMask) internal_assert("block size beyond 2^48 bytes");
  return Key{(stream_rank_[blk.stream] << kSizeBits) | blk.size, pack_address(blk.addr, b)};
}

PytorchCachingAllocator::Key PytorchCachingAllocator::address_key(uint32_t b) const {
  return Key{stream_rank_[blocks_[b].stream] << kSizeBits, pack_address(blocks_[b].addr, b)};
}

// Block::gc_count_base: the pool's get_free_block count when the block was cached.
[[gnu::always_inline]] inline void PytorchCachingAllocator::stamp_gc_count(uint32_t b, const Pool& pool) {
  if (!gc_on_) return;
  if (gc_count_base_.size() < blocks_.size()) gc_count_base_.resize(blocks_.size());
  gc_count_base_[b] = pool.get_free_blocks_call_count;
}

[[gnu::always_inline]] inline void PytorchCachingAllocator::insert_into_blocks(uint32_t b) {
  Pool& pool = pool_of(b);
  stamp_gc_count(b, pool);
  if (!pool.blocks.insert(size_key(b))) internal_assert("block inserted twice");
}

[[gnu::always_inline]] inline void PytorchCachingAllocator::replace_in_blocks(const Key& old, uint32_t b) {
  Pool& pool = pool_of(b);
  stamp_gc_count(b, pool);
  pool.blocks.replace(old, size_key(b));
}

void PytorchCachingAllocator::erase_from_blocks(uint32_t b) {
  if (pool_of(b).blocks.erase(size_key(b)) != 1) internal_assert("erasing a block not in its pool");
}

uint64_t PytorchCachingAllocator::gc_count(uint32_t b) {
  // Block::gc_count(): the int cast, then size_t, as in the source.
  return static_cast<uint64_t>(static_cast<int>(pool_of(b).get_free_blocks_call_count - gc_count_base_[b]));
}

void PytorchCachingAllocator::grow_reserved(uint64_t bytes) {
  total_allocated_memory_ += bytes;
  stats_.reserved += bytes;
  stats_.reserved_peak = std::max(stats_.reserved_peak, stats_.reserved);
  ++stats_.num_device_alloc;
}

void PytorchCachingAllocator::shrink_reserved(uint64_t bytes) {
  total_allocated_memory_ -= bytes;
  stats_.reserved -= bytes;
  ++stats_.num_device_free;
}

// ---- malloc --------------------------------------------------------------------------

uint32_t PytorchCachingAllocator::malloc_block(uint64_t orig_size, StreamIndex stream, PoolIndex pool) {
  if (stream >= stream_rank_.size()) internal_assert("stream index " + std::to_string(stream) + " unknown");
  uint64_t size = round_size(orig_size, config_);
  Pool& bp = pool == 0 ? pool_at(size <= kSmallSize ? 1 : 0) : pool_for(pool, size <= kSmallSize);
  Params p{size, stream, &bp, pytorch_allocation_size(size, config_.large_segment_size), bp.expandable};
  if (!expandable_flips_.empty()) [[unlikely]]
    p.expandable = expandable_for(bp);
  // captures_underway is not empty while a request goes to a private pool (a capture or use_mem_pool
  // routes it there), or while another stream's capture is underway, and malloc then skips its last
  // resort, release_cached_blocks (C10_LIKELY(captures_underway.empty())).
  bool found = get_free_block(p);  // no free-memory callbacks are registered in a plain process: one search
  if (!found) {
    if (gc_on_) garbage_collect_cached_blocks();
    // Pools that opted in as overflow (MemPool(use_on_oom=True)) are tried before anything is freed.
    found = alloc_block(p, false) || try_mempool_fallback(p) ||
            (release_available_cached_blocks(p) && alloc_block(p, false)) ||
            (pool == 0 && !another_capture_underway() && release_cached_blocks() && alloc_block(p, true));
  }
  if (!found) {
    ++stats_.num_ooms;
    return kNoNode;
  }
  bool split_remainder = should_split(p);
  return alloc_found_block(p, split_remainder);
}

// is_expandable_segments_active under a setting the program changed along the trace.
bool PytorchCachingAllocator::expandable_for(const Pool& pool) const {
  return (config_.expandable_segments != in_ranges(expandable_flips_, request_index_)) && !pool.own_allocator;
}

// The limit's offset from the capacity at this request (detail::limit_drift).
int64_t PytorchCachingAllocator::limit_offset() const {
  auto next = std::upper_bound(limit_drift_.begin(), limit_drift_.end(), std::make_pair(request_index_, INT64_MAX));
  return next == limit_drift_.begin() ? 0 : std::prev(next)->second;
}

// Whether `bytes` more pass the limit as it stood at this request: the fraction's allowed maximum, or the
// GPU's (the device's capacity).
bool PytorchCachingAllocator::past_limit(uint64_t bytes) const {
  const std::optional<uint64_t> capacity =
      set_fraction_ ? std::optional<uint64_t>(allowed_memory_maximum_) : device_.capacity();
  if (!capacity) return false;
  return static_cast<int64_t>(total_allocated_memory_ + bytes) > static_cast<int64_t>(*capacity) + limit_offset();
}

bool PytorchCachingAllocator::another_capture_underway() const {
  return in_ranges(capture_windows_.inside, request_index_) ||
         (request_is_recorded_oom_ && in_ranges(capture_windows_.after, request_index_));
}

// try_mempool_fallback: a default-pool request that got no segment takes a cached block of a pool that
// opted in (setUseOnOOM), by get_free_block alone: the fallback never makes a segment. Its AllocParams
// say expandable segments are off, so get_free_block skips expandable segments' blocks (a plain
// MemPool's blocks under expandable_segments:True never serve) and should_split uses the cudaMalloc
// rules. A request already bound for a private pool does not fall back. A deleted MemPool is no
// longer tried (~MemPool's setUseOnOOM(false) before releasePool).
bool PytorchCachingAllocator::try_mempool_fallback(Params& p) {
  if (p.pool->owner != 0) return false;
  for (PoolIndex k : use_on_oom_) {
    if (k >= private_.size() || !private_[k].live || private_[k].freeable) continue;
    Params fallback{p.size, p.stream, &pool_for(k, p.size <= kSmallSize), p.alloc_size, false};
    if (get_free_block(fallback)) {
      p = fallback;
      return true;
    }
  }
  return false;
}

[[gnu::always_inline]] inline bool PytorchCachingAllocator::get_free_block(Params& p) {
  Pool& pool = *p.pool;
  if (gc_on_) ++pool.get_free_blocks_call_count;
  const uint64_t rank = stream_rank_[p.stream];
  auto it = pool.blocks.lower_bound(Key{(rank << kSizeBits) | std::min(p.size, kSizeMask), 0});
  auto same_stream = [&](auto i) { return i != pool.blocks.end() && (i->hi >> kSizeBits) == rank; };
  if (!same_stream(it)) return false;

  // Only where an expandable segment was ever made can a block belong to one: elsewhere nothing below needs
  // the block itself, whose record (a likely cache miss) is then first read where the block is split.
  if (!segments_.empty() && blocks_[it->node()].segment != kNoNode) {
    if (p.expandable) {
      // A block followed by unmapped space counts as the size it can grow to: look for a
      // block whose reach is smaller (the source's expandable_size loop).
      auto expandable_size = [&](uint32_t b) {
        uint32_t n = blocks_[b].next;
        return blocks_[b].size + (n != kNoNode && !mapped(n) ? blocks_[n].size : 0);
      };
      auto next = std::next(it);
      while (blocks_[it->node()].segment != kNoNode && same_stream(next) &&
             expandable_size(next->node()) < expandable_size(it->node()))
        it = next++;
    } else {
      // Expandable segments were turned off later: only ordinary blocks qualify.
      do {
        ++it;
      } while (it != pool.blocks.end() && blocks_[it->node()].segment != kNoNode && same_stream(it));
      if (!same_stream(it)) return false;
    }
  }
  const uint64_t found_size = it->hi & kSizeMask;
  // Do not return an oversized block for a request below max_split_size.
  if (p.size < config_.max_split_size && found_size >= config_.max_split_size) return false;
  // An oversized block may serve a large request only when it wastes less than this.
  if (p.size >= config_.max_split_size && found_size >= p.size + config_.max_non_split_rounding_size) return false;
  // The block leaves the pool in alloc_found_block: one move if its remainder goes back.
  p.block = it->node();
  p.block_in_pool = true;
  p.found_size = found_size;
  p.position = it;
  return true;
}

// The block is in p.pool (found there, or a new segment of it); a found block's size is its key's.
[[gnu::always_inline]] inline bool PytorchCachingAllocator::should_split(const Params& p) const {
  const Pool& pool = *p.pool;
  if (pool.no_split) [[unlikely]]  // no_split_pools (MemPool(no_split=True))
    return false;
  const uint64_t size = p.size;
  uint64_t remaining = (p.block_in_pool ? p.found_size : blocks_[p.block].size) - size;
  if (pool.small || p.expandable) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

[[gnu::always_inline]] inline uint32_t PytorchCachingAllocator::alloc_found_block(const Params& p,
                                                                                  bool split_remainder) {
  uint32_t block = p.block;
  if (split_remainder) {
    uint32_t remaining = block;
    block = new_block(blocks_[remaining].addr, p.size, p.stream, p.pool->index);
    PytorchBlock& r = blocks_[remaining];
    PytorchBlock& b = blocks_[block];
    b.segment = r.segment;
    b.prev = r.prev;
    if (b.prev != kNoNode) blocks_[b.prev].next = block;
    b.next = remaining;
    r.prev = block;
    r.addr += p.size;
    r.size -= p.size;
    if (p.block_in_pool) {
      stamp_gc_count(remaining, *p.pool);
      p.pool->blocks.replace(p.position, size_key(remaining));
    } else {
      insert_into_blocks(remaining);
    }
  } else if (p.block_in_pool) {
    p.pool->blocks.erase(p.position);
  }
  set_allocated(block, true);
  stats_.allocated += blocks_[block].size;
  stats_.allocated_peak = std::max(stats_.allocated_peak, stats_.allocated);
  return block;
}

bool PytorchCachingAllocator::alloc_block(Params& p, bool is_retry) {
  if (is_retry) ++stats_.num_alloc_retries;
  // set_per_process_memory_fraction: checked against the cudaMalloc size even when
  // expandable segments will map less.
  // The limit followed along the trace, where one limit does not explain its device calls.
  if (limit_drift_.empty()) {
    if (set_fraction_ && total_allocated_memory_ + p.alloc_size > allowed_memory_maximum_) return false;
  } else if ((set_fraction_ || !p.expandable) && past_limit(p.alloc_size)) {
    return false;  // under the GPU's limit an expandable segment's maps are checked page by page (map_block)
  }
  // A MemPool's own allocator (allocPrimitive's raw_alloc) is a device segment call like cudaMalloc.
  if (p.expandable) {
    p.block = try_allocate_expandable_block(p.stream, *p.pool, p.size);
    if (p.block != kNoNode) count_device_alloc(*p.pool, +1);
    return p.block != kNoNode;
  }
  auto addr = device_.allocate_segment(p.alloc_size, p.stream);
  if (!addr) return false;
  p.block = new_block(*addr, p.alloc_size, p.stream, p.pool->index);
  count_device_alloc(*p.pool, +1);
  grow_reserved(p.alloc_size);
  stats_.segments_peak = std::max(stats_.segments_peak, ++stats_.segments);
  return true;
}

// ---- freeing ---------------------------------------------------------------------------

void PytorchCachingAllocator::free(uint32_t b) {
  if (b >= blocks_.size() || !allocated(b)) internal_assert("free of a block that is not allocated");
  set_allocated(b, false);
  stats_.allocated -= blocks_[b].size;
  // free_block: merge with free neighbours (try_merge_blocks), then back into the pool. Written
  // out for the two neighbours (a loop over them went through the stack).
  const uint32_t prev = blocks_[b].prev, next = blocks_[b].next;
  const bool from_prev = prev != kNoNode && flags_[prev] == kMapped;  // neither allocated nor unmapped
  const bool from_next = next != kNoNode && flags_[next] == kMapped;
  if (!from_prev && !from_next) {
    insert_into_blocks(b);
    return;
  }
  // The last merged neighbour's place in the pool is handed to the merged block (one move).
  Key vacated{};
  if (from_prev) {
    vacated = size_key(prev);
    absorb(b, prev);
  }
  if (from_next) {
    if (from_prev) pool_of(b).blocks.erase(vacated);
    vacated = size_key(next);
    absorb(b, next);
  }
  replace_in_blocks(vacated, b);
}

size_t PytorchCachingAllocator::try_merge_blocks(uint32_t dst, uint32_t src) {
  if (src == kNoNode || allocated(src) || mapped(src) != mapped(dst)) return 0;
  // The neighbour leaves its set before anything about it changes.
  if (mapped(src))
    erase_from_blocks(src);
  else
    pool_of(src).unmapped.erase(address_key(src));
  return absorb(dst, src);
}

[[gnu::always_inline]] inline uint64_t PytorchCachingAllocator::absorb(uint32_t dst, uint32_t src) {
  PytorchBlock& d = blocks_[dst];
  const PytorchBlock s = blocks_[src];
  if (d.prev == src) {  // [src dst]
    d.addr = s.addr;
    d.prev = s.prev;
    if (d.prev != kNoNode) blocks_[d.prev].next = dst;
  } else {  // [dst src]
    d.next = s.next;
    if (d.next != kNoNode) blocks_[d.next].prev = dst;
  }
  d.size += s.size;
  delete_block(src);
  return s.size;
}

void PytorchCachingAllocator::empty_cache() { release_cached_blocks(); }

bool PytorchCachingAllocator::release_cached_blocks() {
  // synchronize_and_free_events() has nothing to do here: pending frees arrive from the
  // trace when they completed.
  release_blocks(pool_at(0));
  release_blocks(pool_at(1));
  release_private_pools();
  return true;
}

void PytorchCachingAllocator::release_pool(PoolIndex pool) {
  if (pool == 0 || pool >= private_.size() || !private_[pool].live) return;
  private_[pool].freeable = true;
  // ~MemPool: releasePool, then emptyCache(id): release_cached_blocks with the pool's MempoolId returns
  // that pool's cached segments alone (the default pools and other freeable pools stay).
  if (pool < pool_infos_.size() && pool_infos_[pool].empties_on_release) release_private_pool(pool);
}

// The graph_pools_freeable loop: each freeable pool in turn.
void PytorchCachingAllocator::release_private_pools() {
  for (size_t k = 1; k < private_.size(); ++k)
    if (private_[k].freeable) release_private_pool(k);
}

// A freeable pool's small blocks, then large; a pool holding nothing more is erased from graph_pools.
void PytorchCachingAllocator::release_private_pool(size_t k) {
  release_blocks(pool_at(2 * k + 1));
  release_blocks(pool_at(2 * k));
  if (private_[k].device_allocs == 0) private_[k] = PrivatePool{};
}

void PytorchCachingAllocator::release_blocks(Pool& pool) {
  std::vector<uint32_t> to_unmap;
  // In pool order; releasing a block removes only that block from the pool.
  std::vector<uint32_t> order;
  for (const Key& k : pool.blocks) order.push_back(k.node());
  for (uint32_t b : order) {
    if (blocks_[b].segment != kNoNode)
      to_unmap.push_back(b);  // unmapping mutates the pool: later
    else if (!blocks_[b].is_split())
      release_block(b);
  }
  for (uint32_t b : to_unmap) {
    unmap_block(b);
    if (!blocks_[b].is_split()) release_expandable_segment(b);
  }
}

void PytorchCachingAllocator::release_block(uint32_t b) {
  if (blocks_[b].segment != kNoNode) internal_assert("release_block of an expandable segment's block");
  device_.free_segment(blocks_[b].addr, blocks_[b].size);
  shrink_reserved(blocks_[b].size);
  count_device_alloc(pool_of(b), -1);
  --stats_.segments;
  erase_from_blocks(b);
  delete_block(b);
}

// Whether release_block can cudaFree block b: a whole cudaMalloc'd segment. PyTorch never splits a block of
// max_split_size or more, so every oversize block it meets here is one; a state adopted from a recording
// made under other settings (a what-if: max_split_size set on a history begun mid-run) may hold oversize
// blocks that are parts of segments, which no cudaFree can return: they stay cached, like expandable
// segments' blocks (PyTorch's cudaFree of an interior pointer would fail).
bool PytorchCachingAllocator::releasable(uint32_t b) const {
  return blocks_[b].segment == kNoNode && !blocks_[b].is_split();
}

bool PytorchCachingAllocator::release_available_cached_blocks(const Params& p) {
  if (config_.max_split_size == UINT64_MAX) return false;
  Pool& pool = *p.pool;
  const uint64_t rank = stream_rank_[p.stream];
  const uint64_t key_size = p.size < config_.max_split_size ? config_.max_split_size : p.size;
  auto it = pool.blocks.lower_bound(Key{(rank << kSizeBits) | std::min(key_size, kSizeMask), 0});
  // Expandable segments' blocks are never cudaFree'd here (they are unmapped by
  // release_cached_blocks instead): the source skips them.
  if (it == pool.blocks.end() || (it->hi >> kSizeBits) != rank || blocks_[it->node()].segment != kNoNode) {
    // No single block is large enough: free oversize blocks, the largest first.
    if (it == pool.blocks.begin()) return false;
    uint64_t total_released = 0;
    --it;
    while (total_released < key_size && blocks_[it->node()].size >= config_.max_split_size &&
           (it->hi >> kSizeBits) == rank) {
      uint32_t cur = it->node();
      bool is_first = it == pool.blocks.begin();
      if (!is_first) --it;
      if (releasable(cur)) {
        total_released += blocks_[cur].size;
        release_block(cur);
      }
      if (is_first) break;
    }
    if (total_released < key_size) return false;
  } else {
    if (!releasable(it->node())) return false;
    release_block(it->node());
  }
  return true;
}

void PytorchCachingAllocator::garbage_collect_cached_blocks() {
  const auto gc_threshold =
      static_cast<uint64_t>(config_.garbage_collection_threshold * static_cast<double>(allowed_memory_maximum_));
  if (total_allocated_memory_ <= gc_threshold) return;
  const uint64_t target_size = total_allocated_memory_ - gc_threshold;
  uint64_t gc_reclaimed = 0;

  // The average age (get_free_block calls since a block was cached) of whole free segments.
  uint64_t total_age = 0;
  int freeable_block_count = 0;
  for (const Key& k : pool_at(0).blocks) {
    if (!blocks_[k.node()].is_split()) {
      total_age += gc_count(k.node());
      ++freeable_block_count;
    }
  }
  if (freeable_block_count == 0) return;

  bool block_freed = true;
  while (gc_reclaimed < target_size && block_freed && freeable_block_count > 0) {
    double age_threshold = static_cast<double>(total_age) / freeable_block_count;
    block_freed = false;
    // Free every block at least as old as the average; don't stop at the target.
    std::vector<uint32_t> order;
    for (const Key& k : pool_at(0).blocks) order.push_back(k.node());
    for (uint32_t b : order) {
      if (!blocks_[b].is_split() && blocks_[b].segment == kNoNode &&
          static_cast<double>(gc_count(b)) >= age_threshold) {
        block_freed = true;
        gc_reclaimed += blocks_[b].size;
        total_age -= gc_count(b);
        --freeable_block_count;
        release_block(b);
      }
    }
  }
}

// ---- expandable segments -------------------------------------------------------------------

uint32_t PytorchCachingAllocator::find_expandable_block(StreamIndex stream, Pool& pool, uint64_t size) {
  auto allocatable = [&](uint32_t b) { return b != kNoNode && !allocated(b); };
  auto has_available_address_space = [&](uint32_t b) {
    uint64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
      bytes += blocks_[b].size;
      b = blocks_[b].next;
    }
    return bytes >= size;
  };
  const uint64_t rank = stream_rank_[stream];
  for (auto it = pool.unmapped.lower_bound(Key{rank << kSizeBits, 0});
       it != pool.unmapped.end() && (it->hi >> kSizeBits) == rank; ++it) {
    uint32_t c = it->node();
    // The lowest unmapped address; a free block right before it can be used too.
    if (allocatable(blocks_[c].prev)) c = blocks_[c].prev;
    if (has_available_address_space(c)) return c;
  }
  // A new segment: address space for 1 1/8 of the GPU's memory, in pages of 2 MiB (small
  // pool) or 20 MiB (large pool).
  ExpandableSegment es;
  es.segment_size = pool.small ? kSmallBuffer : config_.large_segment_size;
  es.max_handles = expandable_range_size(total_memory_, es.segment_size) / es.segment_size;
  es.stream = stream;
  es.live = true;
  auto base = device_.reserve_range(es.size());
  if (!base) return kNoNode;
  es.base = *base;
  segments_.push_back(es);
  uint32_t c = new_block(es.base, es.size(), stream, pool.index);
  set_mapped(c, false);
  blocks_[c].segment = static_cast<uint32_t>(segments_.size() - 1);
  pool.unmapped.insert(address_key(c));
  return c;
}

bool PytorchCachingAllocator::map_block(uint32_t to_map, uint64_t size) {
  if (mapped(to_map) || size > blocks_[to_map].size) internal_assert("map_block of a mapped block");
  const ExpandableSegment& es = segments_[blocks_[to_map].segment];
  const uint64_t offset = blocks_[to_map].addr - es.base;
  const uint64_t begin = offset / es.segment_size;
  const uint64_t end = (offset + size + es.segment_size - 1) / es.segment_size;
  if (begin == end) return false;
  if (begin * es.segment_size != offset) internal_assert("map_block of an unaligned block");
  const uint64_t mapped_size = (end - begin) * es.segment_size;
  // The GPU's limit followed along the trace: cuMemCreate fails for the pages past it.
  if (!set_fraction_ && !limit_drift_.empty() && past_limit(mapped_size)) return false;
  if (!device_.map_pages(blocks_[to_map].addr, mapped_size, blocks_[to_map].stream)) return false;

  Pool& pool = pool_of(to_map);
  pool.unmapped.erase(address_key(to_map));
  set_mapped(to_map, true);
  if (mapped_size < blocks_[to_map].size) {
    // to_map -> remaining (still unmapped) -> to_map's old next
    uint32_t remaining = new_block(blocks_[to_map].addr + mapped_size, blocks_[to_map].size - mapped_size,
                                   blocks_[to_map].stream, blocks_[to_map].pool);
    set_mapped(remaining, false);
    PytorchBlock& r = blocks_[remaining];
    r.segment = blocks_[to_map].segment;
    r.prev = to_map;
    r.next = blocks_[to_map].next;
    if (r.next != kNoNode) blocks_[r.next].prev = remaining;
    blocks_[to_map].next = remaining;
    pool.unmapped.insert(address_key(remaining));
    blocks_[to_map].size = mapped_size;
  }
  try_merge_blocks(to_map, blocks_[to_map].prev);
  try_merge_blocks(to_map, blocks_[to_map].next);
  insert_into_blocks(to_map);
  grow_reserved(mapped_size);
  return true;
}

uint32_t PytorchCachingAllocator::try_allocate_expandable_block(StreamIndex stream, Pool& pool, uint64_t size) {
  uint32_t candidate = find_expandable_block(stream, pool, size);
  if (candidate == kNoNode) return kNoNode;
  // A request larger than a whole new segment's range (1 1/8 of the GPU's memory) cannot be mapped:
  // PyTorch's cuMemCreate fails first, the GPU having less memory than that. Out of memory, not a crash.
  uint64_t reach = 0;
  for (uint32_t b = candidate; b != kNoNode && !allocated(b) && reach < size; b = blocks_[b].next)
    reach += blocks_[b].size;
  if (reach < size) return kNoNode;
  // candidate: unmapped -> null, unmapped -> free -> *, or free -> unmapped -> *
  if (!mapped(candidate) && !map_block(candidate, std::min(blocks_[candidate].size, size))) return kNoNode;
  while (blocks_[candidate].size < size) {
    // free -> unmapped: map some of the unmapped part, which merges into the free block
    uint64_t remaining = size - blocks_[candidate].size;
    uint32_t next = blocks_[candidate].next;
    // Nothing left to map: the request is larger than a whole segment's address range (1 1/8 of the
    // GPU's memory). PyTorch's cuMemCreate fails long before, as the GPU has not that much memory.
    if (next == kNoNode || mapped(next)) return kNoNode;
    if (!map_block(next, std::min(remaining, blocks_[next].size))) return kNoNode;
    candidate = next;
  }
  erase_from_blocks(candidate);
  return candidate;
}

void PytorchCachingAllocator::unmap_block(uint32_t b) {
  const ExpandableSegment& es = segments_[blocks_[b].segment];
  const uint64_t offset = blocks_[b].addr - es.base;
  // Only pages wholly inside the block.
  const uint64_t begin = (offset + es.segment_size - 1) / es.segment_size;
  const uint64_t end = (offset + blocks_[b].size) / es.segment_size;
  if (begin >= end) return;
  erase_from_blocks(b);
  const Addr unmapped_addr = es.base + begin * es.segment_size;
  const uint64_t unmapped_size = (end - begin) * es.segment_size;
  device_.unmap_pages(unmapped_addr, unmapped_size);

  const uint64_t before_size = unmapped_addr - blocks_[b].addr;
  if (before_size > 0) {  // prev? -> before_free -> block
    uint32_t f = new_block(blocks_[b].addr, before_size, blocks_[b].stream, blocks_[b].pool);
    blocks_[f].segment = blocks_[b].segment;
    blocks_[f].prev = blocks_[b].prev;
    if (blocks_[f].prev != kNoNode) blocks_[blocks_[f].prev].next = f;
    blocks_[f].next = b;
    blocks_[b].prev = f;
    insert_into_blocks(f);
  }
  const uint64_t after_size = blocks_[b].size - (before_size + unmapped_size);
  if (after_size > 0) {  // block -> after_free -> next?
    uint32_t f = new_block(unmapped_addr + unmapped_size, after_size, blocks_[b].stream, blocks_[b].pool);
    blocks_[f].segment = blocks_[b].segment;
    blocks_[f].next = blocks_[b].next;
    if (blocks_[f].next != kNoNode) blocks_[blocks_[f].next].prev = f;
    blocks_[f].prev = b;
    blocks_[b].next = f;
    insert_into_blocks(f);
  }
  blocks_[b].addr = unmapped_addr;
  blocks_[b].size = unmapped_size;
  set_mapped(b, false);
  try_merge_blocks(b, blocks_[b].prev);
  try_merge_blocks(b, blocks_[b].next);
  pool_of(b).unmapped.insert(address_key(b));
  shrink_reserved(unmapped_size);
  count_device_alloc(pool_of(b), -1);
}

void PytorchCachingAllocator::release_expandable_segment(uint32_t b) {
  ExpandableSegment& es = segments_[blocks_[b].segment];
  if (blocks_[b].size != es.size() || mapped(b)) internal_assert("block disagrees with segment");
  device_.release_range(es.base, es.size());
  es.live = false;
  pool_of(b).unmapped.erase(address_key(b));
  delete_block(b);
}

}  // namespace fraglab::detail

// ---- adopting the state at a trace's first event ---------------------------------------------

namespace fraglab::detail {

uint64_t PytorchCachingAllocator::estimate_block_size(uint64_t requested, uint64_t room, bool small,
                                                      bool expandable) const {
  // What alloc_found_block would have cut for the request from a free block reaching `room`
  // bytes: small pool and expandable segments always split (sizes are 512-byte multiples, so no
  // remainder is below kMinBlockSize); the large pool keeps a remainder of at most 1 MiB, which no
  // large-pool block can be, and an oversize block is never split.
  const uint64_t rounded = pytorch_round_size(requested, config_);
  if (rounded >= room) return room;
  if (small || expandable) return rounded;
  if (rounded >= config_.max_split_size) return room - rounded < config_.max_non_split_rounding_size ? room : rounded;
  return room - rounded <= kSmallSize ? room : rounded;
}

uint32_t PytorchCachingAllocator::chain(uint32_t prev, uint32_t b) {
  blocks_[b].prev = prev;
  if (prev != kNoNode) blocks_[prev].next = b;
  return b;
}

// One mapped extent (a cudaMalloc'd segment, or a mapped range of an expandable segment) at `base`,
// tiled with its live blocks and one free block in each gap. Returns the last block.
uint32_t PytorchCachingAllocator::lay_out(const RecordedSegment& seg, Addr base, uint32_t segment, uint32_t prev,
                                          std::vector<std::pair<Addr, uint32_t>>& live) {
  const Addr end = seg.address + seg.total_size;
  Addr cursor = seg.address;
  const uint16_t pool = pool_for(pool_index_of(seg.pool_id), seg.small_pool).index;
  auto add = [&](Addr at, uint64_t size, bool allocated) {
    uint32_t b = new_block(base + (at - seg.address), size, seg.stream, pool);
    blocks_[b].segment = segment;
    prev = chain(prev, b);
    if (allocated) {
      set_allocated(b, true);
      stats_.allocated += size;
      live.emplace_back(at, b);
    } else {
      insert_into_blocks(b);
    }
  };
  for (size_t i = 0; i < seg.blocks.size(); ++i) {
    const RecordedBlock& r = seg.blocks[i];
    if (r.address < cursor || r.address >= end) continue;  // overlapping or outside: inconsistent input
    if (r.address > cursor) add(cursor, r.address - cursor, false);
    const Addr boundary = i + 1 < seg.blocks.size() ? std::min(seg.blocks[i + 1].address, end) : end;
    // A no_split pool's block is the whole free block it was cut from: up to the next live block.
    uint64_t size = r.size                   ? std::min(r.size, boundary - r.address)
                    : pool_at(pool).no_split ? boundary - r.address
                                             : estimate_block_size(r.requested_size, boundary - r.address,
                                                                   seg.small_pool, segment != kNoNode);
    add(r.address, size, true);
    cursor = r.address + size;
  }
  if (cursor < end) add(cursor, end - cursor, false);
  stats_.allocated_peak = std::max(stats_.allocated_peak, stats_.allocated);
  return prev;
}

std::optional<std::vector<uint32_t>> PytorchCachingAllocator::adopt(const InitialState& state) {
  // A state PyTorch could not have held under this memory fraction (a what-if capacity below it; the
  // fraction's own overshoot, an expandable segment's last page, is less than a large page) is declined:
  // the prologue is then served as requests, under the limit.
  if (set_fraction_ && state.reserved() > allowed_memory_maximum_ + config_.large_segment_size) return std::nullopt;
  std::vector<std::pair<Addr, uint32_t>> live;  // recorded address -> block
  // Expandable ranges of one stream, pool kind and private pool belong to one ExpandableSegment
  // (PyTorch makes a second one only when 1 1/8 of the GPU's memory is not enough). Its base is taken
  // as the lowest range's address, since PyTorch maps at the lowest free address; its address range is
  // reserved when that range comes in address order, so that a recording's hints come in order.
  std::vector<ExpandableGroup> groups;
  for (const RecordedSegment& seg : state.segments) {
    if (!seg.is_expandable) {
      auto addr = device_.allocate_segment(seg.total_size, seg.stream);
      if (!addr) return std::nullopt;
      grow_reserved(seg.total_size);
      stats_.segments_peak = std::max(stats_.segments_peak, ++stats_.segments);
      count_device_alloc(pool_for(pool_index_of(seg.pool_id), seg.small_pool), +1);
      lay_out(seg, *addr, kNoNode, kNoNode, live);
      continue;
    }
    // A range beyond a group's reserved span is another ExpandableSegment (its pool only guessed, until
    // the pool check revises it): one segment never spans two reservations.
    auto g = std::find_if(groups.begin(), groups.end(), [&](const ExpandableGroup& x) {
      return x.stream == seg.stream && x.small == seg.small_pool && x.pool == pool_index_of(seg.pool_id) &&
             seg.address + seg.total_size <= x.recorded_base + segments_[x.segment].size();
    });
    if (g == groups.end()) {
      ExpandableSegment es;
      es.segment_size = seg.small_pool ? kSmallBuffer : config_.large_segment_size;
      es.max_handles = expandable_range_size(total_memory_, es.segment_size) / es.segment_size;
      es.stream = seg.stream;
      es.live = true;
      auto base = device_.reserve_range(es.size());
      if (!base) return std::nullopt;
      es.base = *base;
      segments_.push_back(es);
      groups.push_back(ExpandableGroup{seg.stream,
                                       seg.small_pool,
                                       pool_index_of(seg.pool_id),
                                       static_cast<uint32_t>(segments_.size() - 1),
                                       seg.address,
                                       {}});
      g = std::prev(groups.end());
    }
    g->ranges.push_back(&seg);
  }
  for (const ExpandableGroup& g : groups)
    if (!adopt_expandable(g, live)) return std::nullopt;
  std::sort(live.begin(), live.end());
  std::vector<uint32_t> out;
  out.reserve(live.size());
  for (const auto& [addr, b] : live) out.push_back(b);
  return out;
}

// The whole reserved range as a chain of blocks: unmapped gaps, then each mapped range tiled.
bool PytorchCachingAllocator::adopt_expandable(const ExpandableGroup& g, std::vector<std::pair<Addr, uint32_t>>& live) {
  const ExpandableSegment& es = segments_[g.segment];
  const Addr recorded_end = g.recorded_base + es.size();
  auto device_addr = [&](Addr recorded) { return es.base + (recorded - g.recorded_base); };
  Pool& pool = pool_for(g.pool, g.small);
  uint32_t prev = kNoNode;
  Addr cursor = g.recorded_base;
  auto unmapped = [&](Addr from, Addr to) {
    uint32_t b = new_block(device_addr(from), to - from, g.stream, pool.index);
    set_mapped(b, false);
    blocks_[b].segment = g.segment;
    prev = chain(prev, b);
    pool.unmapped.insert(address_key(b));
  };
  for (const RecordedSegment* r : g.ranges) {
    if (r->address < cursor || r->address + r->total_size > recorded_end) return false;  // inconsistent
    if (r->address > cursor) unmapped(cursor, r->address);
    if (!device_.map_pages(device_addr(r->address), r->total_size, g.stream)) return false;
    grow_reserved(r->total_size);
    count_device_alloc(pool, +1);
    prev = lay_out(*r, device_addr(r->address), g.segment, prev, live);
    cursor = r->address + r->total_size;
  }
  if (cursor < recorded_end) unmapped(cursor, recorded_end);
  return true;
}

}  // namespace fraglab::detail
