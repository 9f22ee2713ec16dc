// rmm_binning: RAPIDS RMM's binning_memory_resource over a pool_memory_resource.
//
// Models rapidsai/rmm cpp/include/rmm/mr/binning_memory_resource.hpp and
// fixed_size_memory_resource.hpp (with detail/fixed_size_free_list.hpp):
//  - one fixed_size_memory_resource bin per power of two 2^min_exponent .. 2^max_exponent;
//    a request goes to the smallest bin whose size holds it (get_resource: lower_bound);
//    larger requests go to the upstream, here the pool (allocators/detail/stream_ordered_pool.h),
//    as RMM's replay benchmark composes them;
//  - a bin hands out blocks of exactly its size from per-stream free lists (FIFO: blocks are
//    taken from the front, freed ones appended), takes other streams' blocks before
//    growing, and grows by one upstream chunk of blocks_to_preallocate (128) blocks;
//  - every bin takes its first chunk when it is made, in the binning resource's constructor
//    (fixed_size_memory_resource's constructor calls blocks_from_upstream on
//    cuda_stream_legacy): bins in increasing size, on the default stream, before any request.
//    With the default bins that is 32+64+128+256+512 MiB from the pool, which grows by
//    max(request, pool size) each time: 992 MiB in 5 upstream blocks on every trace. Modelled
//    at the first allocation (the device is not there before), on the trace's default stream
//    (handle 0; a stream of its own when the trace has none).
// Checked against RMM v25.10.00 (rapidsai/rmm 7aaad1de, cpp/include/rmm/mr/device/...) on an
// H100 by tools/peers (docs/peers.md).
//  - freed blocks never coalesce; RMM returns the chunks only at destruction. empty_cache
//    here returns chunks whose blocks are all free to the pool, then the pool's wholly free
//    upstream blocks to the device.
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "allocators/detail/stream_ordered_pool.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::StreamOrderedPool;

constexpr uint64_t kFromPool = 1ull << 63;  // Block::handle flag: a fallback (pool) block

class FixedSizeBin {
 public:
  FixedSizeBin(uint64_t block_size, uint64_t blocks_per_chunk)
      : block_size_(block_size), per_chunk_(blocks_per_chunk) {}

  std::optional<Addr> allocate(StreamOrderedPool& pool, StreamIndex stream) {
    if (auto a = pop(stream)) return a;
    // The first other stream with a free block, in stream order (walking every stream's list,
    // mostly empty, made each miss cost the stream count).
    for (StreamIndex other : nonempty_)
      if (other != stream) return pop(other);
    if (!take_chunk(pool, stream)) return std::nullopt;
    return pop(stream);
  }

  // blocks_from_upstream: one chunk from the pool, cut into blocks on `stream`'s free list.
  bool take_chunk(StreamOrderedPool& pool, StreamIndex stream) {
    auto chunk = pool.allocate(block_size_ * per_chunk_, stream);
    if (!chunk) return false;
    chunks_.emplace(chunk->addr, Chunk{chunk->node, stream});
    for (uint64_t i = 0; i < per_chunk_; ++i) push(chunk->addr + i * block_size_, stream);
    return true;
  }

  void deallocate(Addr addr, StreamIndex stream) { push(addr, stream); }

  // Gives chunks whose blocks are all free back to the pool.
  void release_free_chunks(StreamOrderedPool& pool) {
    std::map<Addr, uint64_t> free_count;
    for (const auto& [stream, list] : lists_)
      for (Addr a : list) ++free_count[chunk_of(a)];
    std::vector<Addr> whole;
    for (const auto& [start, n] : free_count)
      if (n == per_chunk_) whole.push_back(start);
    if (whole.empty()) return;
    for (auto& [stream, list] : lists_) {
      std::deque<Addr> kept;
      for (Addr a : list)
        if (!std::binary_search(whole.begin(), whole.end(), chunk_of(a))) kept.push_back(a);
      list.swap(kept);
      if (list.empty()) nonempty_.erase(stream);
    }
    for (Addr start : whole) {
      pool.deallocate(chunks_.at(start).node, chunks_.at(start).stream);
      chunks_.erase(start);
    }
  }

 private:
  struct Chunk {
    uint32_t node;
    StreamIndex stream;
  };

  std::optional<Addr> pop(StreamIndex stream) {
    auto found = lists_.find(stream);
    if (found == lists_.end() || found->second.empty()) return std::nullopt;
    Addr a = found->second.front();
    found->second.pop_front();
    if (found->second.empty()) nonempty_.erase(stream);
    return a;
  }
  void push(Addr addr, StreamIndex stream) {
    lists_[stream].push_back(addr);
    nonempty_.insert(stream);
  }
  Addr chunk_of(Addr addr) const { return std::prev(chunks_.upper_bound(addr))->first; }

  uint64_t block_size_, per_chunk_;
  std::map<StreamIndex, std::deque<Addr>> lists_;
  std::set<StreamIndex> nonempty_;  // streams whose list holds a block
  std::map<Addr, Chunk> chunks_;    // upstream chunks by start address
};

class RmmBinning final : public Policy {
 public:
  RmmBinning(Device& device, int min_exp, int max_exp, uint64_t blocks_per_chunk, uint64_t initial,
             std::optional<uint64_t> maximum, StreamIndex default_stream)
      : pool_(device, initial, maximum), default_stream_(default_stream) {
    for (int e = min_exp; e <= max_exp; ++e) bins_.emplace(1ull << e, FixedSizeBin(1ull << e, blocks_per_chunk));
  }

  std::optional<Block> allocate(const AllocRequest& req) override {
    if (!constructed_) {  // what RMM's constructor does: each bin's first chunk, smallest bin first
      constructed_ = true;
      for (auto& [size, bin] : bins_)
        if (!bin.take_chunk(pool_, default_stream_)) return std::nullopt;
    }
    uint64_t size = std::max<uint64_t>(req.size, 1);
    auto bin = bins_.lower_bound(size);
    if (bin == bins_.end()) {
      auto piece = pool_.allocate(size, req.stream);
      if (!piece) return std::nullopt;
      return Block{piece->addr, piece->size, kFromPool | (uint64_t{req.stream} << 32) | piece->node};
    }
    auto addr = bin->second.allocate(pool_, req.stream);
    if (!addr) return std::nullopt;
    return Block{*addr, bin->first, req.stream};
  }

  void deallocate(const Block& block) override {
    if (block.handle & kFromPool) {
      pool_.deallocate(static_cast<uint32_t>(block.handle), static_cast<StreamIndex>(block.handle >> 32));
      return;
    }
    bins_.at(block.size).deallocate(block.addr, static_cast<StreamIndex>(block.handle));
  }

  void empty_cache() override {
    for (auto& [size, bin] : bins_) bin.release_free_chunks(pool_);
    pool_.release_free_blocks();
  }

 private:
  StreamOrderedPool pool_;
  std::map<uint64_t, FixedSizeBin> bins_;  // by block size
  StreamIndex default_stream_;             // cuda_stream_legacy, where the constructor's chunks go
  bool constructed_ = false;
};

// The trace's default stream (handle 0), or an index no event uses when it has none.
StreamIndex legacy_stream(const TraceMeta& meta) {
  for (size_t i = 0; i < meta.streams.size(); ++i)
    if (meta.streams[i] == 0) return static_cast<StreamIndex>(i);
  return static_cast<StreamIndex>(std::min<size_t>(meta.streams.size(), UINT16_MAX));
}

}  // namespace

constexpr IntOption kMinExponent{"min_exponent", 18, "smallest bin: 2^min_exponent bytes"};
constexpr IntOption kMaxExponent{"max_exponent", 22,
                                 "largest bin: 2^max_exponent bytes; larger requests go to the pool"};
constexpr IntOption kBlocksToPreallocate{"blocks_to_preallocate", 128, "blocks per upstream chunk of a bin", 1,
                                         1 << 16};
constexpr SizeOption kInitialSize{"initial_size", 0, "the pool's initial size (0 = grow from the first request)"};
constexpr SizeOption kMaximumSize{"maximum_size", 0, "the pool's maximum size (0 = none)"};

PolicyInfo policy_info_rmm_binning() {
  return {.name = "rmm_binning",
          .summary =
              "RAPIDS RMM binning_memory_resource: fixed-size bins of powers of two over a pool, the pool for "
              "larger sizes",
          .origin =
              "rapidsai/rmm cpp/include/rmm/mr/binning_memory_resource.hpp, fixed_size_memory_resource.hpp, "
              "detail/fixed_size_free_list.hpp",
          .options = {kMinExponent, kMaxExponent, kBlocksToPreallocate, kInitialSize, kMaximumSize},
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            int64_t lo = ctx.options.get(kMinExponent), hi = ctx.options.get(kMaxExponent);
            int64_t per_chunk = ctx.options.get(kBlocksToPreallocate);
            if (lo < 8 || hi > 40 || lo > hi)
              throw PolicyConfigError("rmm_binning: need 8 <= min_exponent <= max_exponent <= 40");
            if (per_chunk < 1) throw PolicyConfigError("rmm_binning: blocks_to_preallocate must be positive");
            uint64_t initial = ctx.options.get(kInitialSize), maximum = ctx.options.get(kMaximumSize);
            if (initial % StreamOrderedPool::kAlignment || maximum % StreamOrderedPool::kAlignment)
              throw PolicyConfigError("rmm_binning: initial_size and maximum_size must be multiples of 256 B");
            return std::make_unique<RmmBinning>(
                ctx.device, static_cast<int>(lo), static_cast<int>(hi), static_cast<uint64_t>(per_chunk), initial,
                maximum ? std::optional<uint64_t>(maximum) : std::nullopt, legacy_stream(ctx.meta));
          },
          .alignment = StreamOrderedPool::kAlignment,
          .preallocation =
              [](const PolicyOptions& o, std::optional<uint64_t>) {
                uint64_t initial = o.get(kInitialSize);
                std::string note = "each bin takes " + std::to_string(o.get(kBlocksToPreallocate)) +
                                   " blocks at a time, the first chunk of every bin at the start";
                return initial ? "initial pool of " + format_size(initial) + "; " + note : note;
              },
          .checked_against =
              "RMM v25.10.00 (rapidsai/rmm 7aaad1de), H100: peak reserved and cudaMalloc calls equal on "
              "the 13 corpus op lists"};
}

}  // namespace fraglab
