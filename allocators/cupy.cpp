// cupy: CuPy's device memory pool (SingleDeviceMemoryPool behind cupy.get_default_memory_pool()).
//
// Models cupy/cuda/memory.pyx (SingleDeviceMemoryPool, _Arena, _Chunk):
//  - sizes round up to the 512 B allocation unit (_round_size); a chunk's bin index is
//    (size - 1) // 512, so every multiple of 512 B has its own bin;
//  - one arena of free lists per stream; a request searches its stream's bins from its
//    own index upwards (lower_bound over the sorted index) and takes a chunk of the first
//    non-empty bin: best fit by size. CuPy pops an arbitrary chunk from the bin's Python
//    set; here the lowest address, to be deterministic;
//  - the chunk is split, the remainder going back to the stream's free lists;
//  - a freed chunk merges with its next and previous chunks when they are free in the same
//    stream's arena;
//  - a miss allocates exactly the rounded size with cudaMalloc (_try_malloc); when that
//    fails, free_all_blocks() (every stream's wholly free chunks) and retry, then (after
//    gc.collect(), which frees nothing here) once more;
//  - set_limit: more than `limit` bytes in the pool fails before cudaMalloc is tried.
// Checked against CuPy 14.2.0 on an H100 by tools/peers/cupy_reference.py (docs/peers.md):
// equal peak total_bytes, used_bytes and cudaMalloc count on every corpus op list.
#include <vector>

#include "allocators/detail/block_list.h"
#include "allocators/detail/per_stream_keys.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::BlockList;
using detail::round_up;

constexpr uint64_t kUnit = 512;

class CupyPool final : public Policy {
 public:
  CupyPool(Device& device, uint64_t limit) : device_(device), limit_(limit) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    uint64_t size = round_up(std::max<uint64_t>(req.size, 1), kUnit);
    uint32_t node = take_chunk(size, req.stream);
    if (node == kNoNode) node = try_malloc(size, req.stream);
    if (node == kNoNode) return std::nullopt;
    return Block{chunks_[node].addr, chunks_[node].size, node};
  }

  void deallocate(const Block& block) override {
    auto node = static_cast<uint32_t>(block.handle);
    StreamIndex stream = chunks_[node].stream;
    add_free(chunks_.merge_with_free_neighbours(node, [&](uint32_t n) { return remove_free(n, stream); }));
  }

  void empty_cache() override { free_all_blocks(); }

 private:
  // A stream's arena: its bins in index order, each bin's chunks by address. A bin holds one
  // size (sizes are multiples of the unit), so this is (size, address) order: the bins'
  // concatenation, in OrderedKeys instead of a std::map of std::sets.
  struct FreeKey {
    uint64_t hi;  // size
    uint64_t lo;  // address
    uint32_t node;
  };
  using Arena = detail::OrderedKeys<FreeKey>;

  uint32_t take_chunk(uint64_t size, StreamIndex stream) {
    Arena* arena = arenas_.find(stream);
    if (!arena) return kNoNode;
    auto it = arena->lower_bound(FreeKey{size, 0, 0});  // the first non-empty bin from the request's
    if (it == arena->end()) return kNoNode;
    uint32_t node = it->node;
    arena->erase(it);
    arenas_.release_if_empty(stream);
    chunks_[node].free = false;
    if (chunks_[node].size > size) add_free(chunks_.split(node, size));
    return node;
  }

  uint32_t try_malloc(uint64_t size, StreamIndex stream) {
    if (limit_ && total_bytes_ + size > limit_) return kNoNode;
    auto addr = device_.allocate_segment(size, stream);
    for (int retry = 0; !addr && retry < 2; ++retry) {  // free_all_blocks; gc.collect + free_all_blocks
      free_all_blocks();
      addr = device_.allocate_segment(size, stream);
    }
    if (!addr) return kNoNode;
    total_bytes_ += size;
    return chunks_.create(*addr, size, 0, stream);
  }

  static FreeKey key_of(const detail::BlockNode& c, uint32_t node) { return FreeKey{c.size, c.addr, node}; }

  void add_free(uint32_t node) {
    chunks_[node].free = true;
    arenas_.get(chunks_[node].stream).insert(key_of(chunks_[node], node));
  }

  // Removes the chunk from `stream`'s free lists; false when it is not free there.
  bool remove_free(uint32_t node, StreamIndex stream) {
    if (!chunks_[node].free || chunks_[node].stream != stream) return false;
    arenas_.find(stream)->erase(key_of(chunks_[node], node));
    arenas_.release_if_empty(stream);
    chunks_[node].free = false;
    return true;
  }

  // Every free chunk that is a whole cudaMalloc allocation goes back (split ones stay), stream
  // by stream, bin by bin, by address within a bin.
  void free_all_blocks() {
    for (size_t s = 0; s < arenas_.stream_bound(); ++s) {
      const auto stream = static_cast<StreamIndex>(s);
      Arena* arena = arenas_.find(stream);
      if (!arena) continue;
      whole_.clear();
      for (const FreeKey& k : *arena)
        if (chunks_.is_whole_segment(k.node)) whole_.push_back(k);
      for (const FreeKey& k : whole_) {
        arena->erase(k);
        device_.free_segment(chunks_[k.node].addr, chunks_[k.node].size);
        total_bytes_ -= chunks_[k.node].size;
        chunks_.destroy(k.node);
      }
      arenas_.release_if_empty(stream);
    }
  }

  Device& device_;
  uint64_t limit_;
  uint64_t total_bytes_ = 0;
  BlockList chunks_;
  detail::PerStreamKeys<FreeKey> arenas_;
  std::vector<FreeKey> whole_;  // free_all_blocks' chunks to return
};

}  // namespace

constexpr SizeOption kLimit{"limit", 0, "pool size limit, as set_limit / CUPY_GPU_MEMORY_LIMIT (0 = none)"};

PolicyInfo policy_info_cupy() {
  return {.name = "cupy",
          .summary =
              "CuPy MemoryPool: 512 B unit, per-stream free lists by bin index, split and merge, "
              "free_all_blocks on OOM",
          .origin = "cupy/cuda/memory.pyx (SingleDeviceMemoryPool, _Arena, _Chunk)",
          .options = {kLimit},
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            return std::make_unique<CupyPool>(ctx.device, ctx.options.get(kLimit));
          },
          .checked_against =
              "CuPy 14.2.0's MemoryPool, H100: peak total_bytes, used_bytes and cudaMalloc calls "
              "equal on the 13 corpus op lists (2 streams on side_stream_prefetch)"};
}

}  // namespace fraglab
