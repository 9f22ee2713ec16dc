// rmm_arena: RAPIDS RMM's arena_memory_resource: a global arena of superblocks shared by
// per-stream arenas.
//
// Models rapidsai/rmm cpp/include/rmm/mr/arena_memory_resource.hpp and detail/arena.hpp:
//  - the global arena is one upstream allocation of arena_size, cut into superblocks of at
//    least 1 MiB (superblock::minimum_size). RMM's default is half the device memory free
//    when the resource is made (global_arena::default_size: cudaMemGetInfo's free / 2); here
//    half the device's capacity, or of the H100 the bundled recordings come from
//    (detail::kH100TotalMemory) on an unlimited device. The real free memory is that less the
//    CUDA context (527 MiB on the H100 measured), so RMM's arena is 0.65% smaller there;
//  - sizes align up to 256 B (the size-class variant, RMM_ARENA_USE_SIZE_CLASSES, is not
//    modelled);
//  - requests above 1 MiB are "handled by the global arena": the first superblock (address
//    order) that fits is taken, split when empty to max(1 MiB, size), the block carved
//    first-fit from it, and the superblock stays global;
//  - smaller requests go to the stream's arena: first fit over its superblocks (address
//    order, first-fit inside each); on a miss the arena acquires a superblock from the
//    global arena the same way;
//  - freed blocks coalesce within their superblock; a global superblock that becomes empty
//    coalesces with empty neighbours. Arenas keep their superblocks, empty or not;
//  - when an allocation fails, defragment(): every arena is cleaned (all its superblocks go
//    back to the global arena and coalesce) and the allocation retried once.
// RMM never returns the global arena before destruction; empty_cache here frees it when no
// block is live (and it is taken again at the next allocation).
// Checked against RMM v25.10.00 (rapidsai/rmm 7aaad1de, cpp/include/rmm/mr/device/
// arena_memory_resource.hpp, detail/arena.hpp) on an H100 by tools/peers (docs/peers.md).
#include <array>
#include <bit>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "allocators/detail/block_list.h"
#include "allocators/detail/pytorch_pool.h"  // detail::kH100TotalMemory, the one GPU-memory default
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::round_up;

constexpr uint64_t kAlign = 256;
constexpr uint64_t kSuperblockMin = 1ull << 20;
constexpr uint32_t kGlobal = UINT32_MAX;

struct Superblock {
  uint64_t size = 0;
  uint32_t owner = kGlobal;          // kGlobal or the stream of the arena holding it
  std::map<Addr, uint64_t> free;     // address-ordered free blocks
  std::multiset<uint64_t> free_sizes;  // to know the largest quickly
  int bucket = -1;                     // floor(log2(largest free block)) it is indexed under
  uint64_t largest() const { return free_sizes.empty() ? 0 : *free_sizes.rbegin(); }
  bool empty() const { return free.size() == 1 && free.begin()->second == size; }
};

class RmmArena final : public Policy {
 public:
  RmmArena(Device& device, uint64_t arena_size) : device_(device), arena_size_(arena_size) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    if (!base_) {
      base_ = device_.allocate_segment(arena_size_, req.stream);
      if (!base_) return std::nullopt;
      add_superblock(*base_, arena_size_, kGlobal);
    }
    uint64_t size = round_up(std::max<uint64_t>(req.size, 1), kAlign);
    auto addr = allocate_in(size, req.stream);
    if (!addr) {
      defragment();
      addr = allocate_in(size, req.stream);
    }
    if (!addr) return std::nullopt;
    ++live_;
    return Block{*addr, size, 0};
  }

  void deallocate(const Block& block) override {
    --live_;
    auto it = std::prev(sbs_.upper_bound(block.addr));
    unindex(it->first);
    give_back(it->second, block.addr, block.size);
    index(it->first);
    if (it->second.owner == kGlobal && it->second.empty()) coalesce_global(it->first);
  }

  void empty_cache() override {
    if (live_ || !base_) return;
    device_.free_segment(*base_, arena_size_);
    sbs_.clear();
    owned_.clear();
    buckets_.clear();
    base_.reset();
  }

 private:
  std::optional<Addr> allocate_in(uint64_t size, StreamIndex stream) {
    if (size > kSuperblockMin) {  // global_arena::handles(size)
      auto sb = global_first_fit(size);
      if (!sb) return std::nullopt;
      return carve(*sb, size);
    }
    if (auto a = first_fitting(stream, size)) return carve(*a, size);
    auto sb = global_first_fit(size);  // acquire a superblock for this arena
    if (!sb) return std::nullopt;
    set_owner(*sb, stream);
    return carve(*sb, size);
  }

  // The global arena's first fit, split to max(1 MiB, size) when the superblock is empty.
  std::optional<Addr> global_first_fit(uint64_t size) {
    auto found = first_fitting(kGlobal, size);
    if (!found) return std::nullopt;
    Addr a = *found;
    Superblock& sb = sbs_.at(a);
    uint64_t head = std::max(kSuperblockMin, size);
    if (sb.empty() && sb.size >= head + kSuperblockMin) {
      uint64_t tail = sb.size - head;
      remove_superblock(a);
      add_superblock(a, head, kGlobal);
      add_superblock(a + head, tail, kGlobal);
    }
    return a;
  }

  // The lowest-addressed superblock of `owner` with a free block of `size` bytes: RMM's
  // linear first fit, found through buckets by floor(log2(largest free block)) so that a
  // search costs the buckets plus a scan of one bucket rather than every superblock.
  std::optional<Addr> first_fitting(uint32_t owner, uint64_t size) {
    auto& buckets = buckets_[owner];
    int k = std::bit_width(size) - 1;
    Addr best = std::numeric_limits<Addr>::max();
    for (int j = k + 1; j < kBuckets; ++j)
      if (!buckets[j].empty()) best = std::min(best, *buckets[j].begin());
    for (Addr a : buckets[k]) {
      if (a >= best) break;
      if (sbs_.at(a).largest() >= size) return a;
    }
    if (best == std::numeric_limits<Addr>::max()) return std::nullopt;
    return best;
  }

  Addr carve(Addr sb_addr, uint64_t size) {
    unindex(sb_addr);
    Addr a = first_fit(sbs_.at(sb_addr), size);
    index(sb_addr);
    return a;
  }

  void index(Addr addr) {
    Superblock& sb = sbs_.at(addr);
    uint64_t largest = sb.largest();
    sb.bucket = largest ? std::bit_width(largest) - 1 : -1;
    if (sb.bucket >= 0) buckets_[sb.owner][sb.bucket].insert(addr);
  }
  void unindex(Addr addr) {
    Superblock& sb = sbs_.at(addr);
    if (sb.bucket >= 0) buckets_[sb.owner][sb.bucket].erase(addr);
    sb.bucket = -1;
  }

  static Addr first_fit(Superblock& sb, uint64_t size) {
    for (auto it = sb.free.begin(); it != sb.free.end(); ++it) {
      if (it->second < size) continue;
      Addr addr = it->first;
      uint64_t rest = it->second - size;
      sb.free_sizes.erase(sb.free_sizes.find(it->second));
      sb.free.erase(it);
      if (rest) {
        sb.free.emplace(addr + size, rest);
        sb.free_sizes.insert(rest);
      }
      return addr;
    }
    return 0;  // callers found it fits
  }

  static void give_back(Superblock& sb, Addr addr, uint64_t size) {
    auto next = sb.free.lower_bound(addr);
    if (next != sb.free.end() && next->first == addr + size) {
      size += next->second;
      sb.free_sizes.erase(sb.free_sizes.find(next->second));
      next = sb.free.erase(next);
    }
    if (next != sb.free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == addr) {
        addr = prev->first;
        size += prev->second;
        sb.free_sizes.erase(sb.free_sizes.find(prev->second));
        sb.free.erase(prev);
      }
    }
    sb.free.emplace(addr, size);
    sb.free_sizes.insert(size);
  }

  // An empty global superblock merges with empty global neighbours (global_arena::coalesce;
  // as RMM coalesces each superblock on release, runs of empty ones end up as one).
  void coalesce_global(Addr addr) {
    auto mergeable = [&](std::map<Addr, Superblock>::iterator it) {
      return it->second.owner == kGlobal && it->second.empty();
    };
    auto it = sbs_.find(addr);
    while (it != sbs_.begin() && mergeable(std::prev(it)) &&
           std::prev(it)->first + std::prev(it)->second.size == it->first)
      --it;
    Addr start = it->first;
    uint64_t size = 0;
    std::vector<Addr> run;
    for (; it != sbs_.end() && mergeable(it) && it->first == start + size; ++it) {
      size += it->second.size;
      run.push_back(it->first);
    }
    if (run.size() < 2) return;
    for (Addr a : run) remove_superblock(a);
    add_superblock(start, size, kGlobal);
  }

  // arena_memory_resource::defragment: every arena's clean() releases all its superblocks.
  void defragment() {
    std::vector<Addr> moving;
    for (auto& [owner, addrs] : owned_)
      if (owner != kGlobal) moving.insert(moving.end(), addrs.begin(), addrs.end());
    for (Addr a : moving) set_owner(a, kGlobal);
    for (Addr a : moving)
      if (sbs_.count(a) && sbs_.at(a).empty()) coalesce_global(a);
  }

  std::map<Addr, Superblock>::iterator add_superblock(Addr addr, uint64_t size, uint32_t owner) {
    Superblock sb;
    sb.size = size;
    sb.owner = owner;
    sb.free.emplace(addr, size);
    sb.free_sizes.insert(size);
    owned_[owner].insert(addr);
    auto it = sbs_.emplace(addr, std::move(sb)).first;
    index(addr);
    return it;
  }
  void remove_superblock(Addr addr) {
    unindex(addr);
    owned_[sbs_.at(addr).owner].erase(addr);
    sbs_.erase(addr);
  }
  void set_owner(Addr addr, uint32_t owner) {
    unindex(addr);
    Superblock& sb = sbs_.at(addr);
    owned_[sb.owner].erase(addr);
    sb.owner = owner;
    owned_[owner].insert(addr);
    index(addr);
  }

  Device& device_;
  uint64_t arena_size_;
  std::optional<Addr> base_;
  uint64_t live_ = 0;
  std::map<Addr, Superblock> sbs_;             // every superblock, address-ordered
  std::map<uint32_t, std::set<Addr>> owned_;  // superblocks by holder (global or stream arena)
  static constexpr int kBuckets = 64;
  std::map<uint32_t, std::array<std::set<Addr>, kBuckets>> buckets_;  // first-fit index per holder
};

}  // namespace

PolicyInfo policy_info_rmm_arena() {
  PolicyInfo info{
      "rmm_arena",
      "RAPIDS RMM arena_memory_resource: global arena of superblocks, per-stream arenas, defragment on failure",
      "rapidsai/rmm cpp/include/rmm/mr/arena_memory_resource.hpp, detail/arena.hpp",
      {{"arena_size", "0", "the global arena, taken whole at the first allocation "
                           "(0 = half the device capacity; half an H100's memory on an unlimited device)"}},
      [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
        uint64_t size = ctx.options.get_size("arena_size", 0);
        if (size == 0) size = ctx.device.capacity().value_or(detail::kH100TotalMemory) / 2;
        size = size / kAlign * kAlign;
        if (size < kSuperblockMin) throw PolicyConfigError("rmm_arena: arena_size below the 1 MiB superblock");
        return std::make_unique<RmmArena>(ctx.device, size);
      }};
  info.alignment = kAlign;
  info.checked_against = "RMM v25.10.00 (rapidsai/rmm 7aaad1de), H100: one cudaMalloc of the arena and no OOM on the "
                         "13 corpus op lists, as RMM; RMM's default arena is half the free memory, 0.65% smaller";
  info.accuracy_note = "RMM's default arena is half the GPU's free memory, which a trace does not record: on an H100 "
                       "0.65% below this model's half of total memory (set arena_size to the real one; docs/peers.md)";
  info.preallocation = [](const PolicyOptions& o, std::optional<uint64_t> capacity) {
    uint64_t size = o.get_size("arena_size", 0);
    if (size) return "arena of " + format_size(size);
    return "arena of half the device (" + format_size(capacity.value_or(detail::kH100TotalMemory) / 2 / kAlign * kAlign) +
           (capacity ? ")" : ", of an H100's memory on an unlimited device)");
  };
  return info;
}

}  // namespace fraglab
