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
#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "allocators/detail/block_list.h"
#include "allocators/pytorch/caching_allocator.h"  // detail::kH100TotalMemory, the one GPU-memory default
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::round_up;

constexpr uint64_t kAlign = 256;
constexpr uint64_t kSuperblockMin = 1ull << 20;
constexpr uint32_t kGlobal = UINT32_MAX;

struct FreeRange {
  Addr addr;
  uint64_t size;
};

// Superblocks tile the arena, so each knows its neighbours (prev/next slots) instead of a
// search in an address-ordered map. Slots are reused, and with them the free list's capacity:
// the global arena splits and merges a superblock at nearly every large request and free,
// which must not cost heap allocations.
struct Superblock {
  Addr addr = 0;
  uint64_t size = 0;
  uint32_t owner = kGlobal;  // kGlobal or the stream of the arena holding it
  uint32_t prev = kNoNode, next = kNoNode;
  bool alive = false;
  int bucket = -1;              // floor(log2(largest)) it is indexed under, -1 if none
  uint64_t largest = 0;         // the largest free block
  std::vector<FreeRange> free;  // free blocks, address-ordered (a few per superblock)
  bool empty() const { return free.size() == 1 && free[0].size == size; }
  void recompute_largest() {
    largest = 0;
    for (const FreeRange& f : free) largest = std::max(largest, f.size);
  }
};

// One holder's superblocks (the global arena's or a stream arena's) with a free block,
// bucketed by floor(log2(largest free block)), each bucket address-ordered.
struct OwnerIndex {
  struct Entry {
    Addr addr;
    uint32_t slot;
  };
  static constexpr int kBuckets = 64;
  uint64_t nonempty = 0;  // bit j: buckets[j] holds an entry
  std::array<std::vector<Entry>, kBuckets> buckets;
};

class RmmArena final : public Policy {
 public:
  RmmArena(Device& device, uint64_t arena_size) : device_(device), arena_size_(arena_size) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    if (!base_) {
      base_ = device_.allocate_segment(arena_size_, req.stream);
      if (!base_) return std::nullopt;
      add_superblock(*base_, arena_size_, kNoNode, kNoNode);
    }
    uint64_t size = round_up(std::max<uint64_t>(req.size, 1), kAlign);
    auto found = allocate_in(size, req.stream);
    if (!found) {
      defragment();
      found = allocate_in(size, req.stream);
    }
    if (!found) return std::nullopt;
    ++live_;
    // The handle is the superblock: one holding a live block is never split, merged or dropped.
    return Block{found->first, size, found->second};
  }

  void deallocate(const Block& block) override {
    --live_;
    auto s = static_cast<uint32_t>(block.handle);
    give_back(slots_[s], block.addr, block.size);
    reindex(s);
    if (slots_[s].owner == kGlobal && slots_[s].empty()) coalesce_global(s);
  }

  void empty_cache() override {
    if (live_ || !base_) return;
    device_.free_segment(*base_, arena_size_);
    slots_.clear();
    dead_.clear();
    index_.clear();
    global_index_ = OwnerIndex{};
    base_.reset();
  }

 private:
  // The block's address and the superblock it was carved from.
  std::optional<std::pair<Addr, uint32_t>> allocate_in(uint64_t size, StreamIndex stream) {
    std::optional<uint32_t> sb;
    if (size > kSuperblockMin) {  // global_arena::handles(size)
      sb = global_first_fit(size);
    } else if (!(sb = first_fitting(stream, size))) {
      sb = global_first_fit(size);  // acquire a superblock for this arena
      if (sb) set_owner(*sb, stream);
    }
    if (!sb) return std::nullopt;
    return std::make_pair(carve(*sb, size), *sb);
  }

  // The global arena's first fit, split to max(1 MiB, size) when the superblock is empty.
  std::optional<uint32_t> global_first_fit(uint64_t size) {
    auto found = first_fitting(kGlobal, size);
    if (!found) return std::nullopt;
    uint32_t s = *found;
    uint64_t head = std::max(kSuperblockMin, size);
    if (slots_[s].empty() && slots_[s].size >= head + kSuperblockMin) split(s, head);
    return s;
  }

  // The lowest-addressed superblock of `owner` with a free block of `size` bytes: RMM's
  // linear first fit, found through buckets by floor(log2(largest free block)) so that a
  // search costs the buckets plus a scan of one bucket rather than every superblock.
  std::optional<uint32_t> first_fitting(uint32_t owner, uint64_t size) {
    const OwnerIndex* found = find_index(owner);
    if (!found) return std::nullopt;
    const OwnerIndex& ix = *found;
    int k = std::bit_width(size) - 1;
    Addr best = std::numeric_limits<Addr>::max();
    uint32_t best_slot = kNoNode;
    for (uint64_t above = k + 1 < OwnerIndex::kBuckets ? ix.nonempty & (~uint64_t{0} << (k + 1)) : 0; above;
         above &= above - 1) {
      const OwnerIndex::Entry& e = ix.buckets[std::countr_zero(above)].front();
      if (e.addr < best) {
        best = e.addr;
        best_slot = e.slot;
      }
    }
    for (const OwnerIndex::Entry& e : ix.buckets[k]) {
      if (e.addr >= best) break;
      if (slots_[e.slot].largest >= size) return e.slot;
    }
    if (best_slot == kNoNode) return std::nullopt;
    return best_slot;
  }

  Addr carve(uint32_t s, uint64_t size) {
    Addr a = first_fit(slots_[s], size);
    reindex(s);
    return a;
  }

  static int bucket_of(uint64_t largest) { return largest ? std::bit_width(largest) - 1 : -1; }

  // The global arena's index is a member: it changes at nearly every large request and free.
  OwnerIndex& index_of(uint32_t owner) { return owner == kGlobal ? global_index_ : index_[owner]; }
  const OwnerIndex* find_index(uint32_t owner) const {
    if (owner == kGlobal) return &global_index_;
    auto found = index_.find(owner);
    return found == index_.end() ? nullptr : &found->second;
  }

  void index(uint32_t s) {
    Superblock& sb = slots_[s];
    sb.bucket = bucket_of(sb.largest);
    if (sb.bucket < 0) return;
    OwnerIndex& ix = index_of(sb.owner);
    auto& v = ix.buckets[sb.bucket];
    auto at =
        std::lower_bound(v.begin(), v.end(), sb.addr, [](const OwnerIndex::Entry& e, Addr a) { return e.addr < a; });
    v.insert(at, OwnerIndex::Entry{sb.addr, s});
    ix.nonempty |= uint64_t{1} << sb.bucket;
  }
  void unindex(uint32_t s) {
    Superblock& sb = slots_[s];
    if (sb.bucket >= 0) {
      OwnerIndex& ix = index_of(sb.owner);
      auto& v = ix.buckets[sb.bucket];
      auto at =
          std::lower_bound(v.begin(), v.end(), sb.addr, [](const OwnerIndex::Entry& e, Addr a) { return e.addr < a; });
      v.erase(at);
      if (v.empty()) ix.nonempty &= ~(uint64_t{1} << sb.bucket);
    }
    sb.bucket = -1;
  }
  // After the largest free block changed: moves the entry only when its bucket did.
  void reindex(uint32_t s) {
    if (bucket_of(slots_[s].largest) == slots_[s].bucket) return;
    unindex(s);
    index(s);
  }

  static Addr first_fit(Superblock& sb, uint64_t size) {
    for (size_t i = 0; i < sb.free.size(); ++i) {
      FreeRange& f = sb.free[i];
      if (f.size < size) continue;
      Addr addr = f.addr;
      bool was_largest = f.size == sb.largest;
      if (f.size > size) {
        f.addr += size;
        f.size -= size;
      } else {
        sb.free.erase(sb.free.begin() + static_cast<ptrdiff_t>(i));
      }
      if (was_largest) sb.recompute_largest();
      return addr;
    }
    return 0;  // callers found it fits
  }

  static void give_back(Superblock& sb, Addr addr, uint64_t size) {
    auto next =
        std::lower_bound(sb.free.begin(), sb.free.end(), addr, [](const FreeRange& f, Addr a) { return f.addr < a; });
    bool merge_next = next != sb.free.end() && next->addr == addr + size;
    bool merge_prev = next != sb.free.begin() && std::prev(next)->addr + std::prev(next)->size == addr;
    uint64_t merged;
    if (merge_prev) {
      auto prev = std::prev(next);
      prev->size += size;
      if (merge_next) {
        prev->size += next->size;
        sb.free.erase(next);
      }
      merged = prev->size;
    } else if (merge_next) {
      next->addr = addr;
      next->size += size;
      merged = next->size;
    } else {
      sb.free.insert(next, FreeRange{addr, size});
      merged = size;
    }
    sb.largest = std::max(sb.largest, merged);
  }

  // An empty global superblock merges with empty global neighbours (global_arena::coalesce;
  // as RMM coalesces each superblock on release, runs of empty ones end up as one).
  void coalesce_global(uint32_t s) {
    auto mergeable = [&](uint32_t t) { return t != kNoNode && slots_[t].owner == kGlobal && slots_[t].empty(); };
    uint32_t first = s;
    while (mergeable(slots_[first].prev)) first = slots_[first].prev;
    uint64_t size = slots_[first].size;
    uint32_t after = slots_[first].next;
    if (!mergeable(after)) return;  // a run of one
    for (; mergeable(after); after = slots_[after].next) {
      size += slots_[after].size;
      drop_slot(after);
    }
    Superblock& sb = slots_[first];
    sb.next = after;
    if (after != kNoNode) slots_[after].prev = first;
    sb.size = size;
    sb.free.assign(1, FreeRange{sb.addr, size});
    sb.largest = size;
    reindex(first);  // same address: its index entry moves only if its bucket changed
  }

  // arena_memory_resource::defragment: every arena's clean() releases all its superblocks
  // (arenas in stream order, each's superblocks in address order).
  void defragment() {
    std::vector<std::tuple<uint32_t, Addr, uint32_t>> moving;  // (owner, address, slot)
    for (uint32_t s = first_slot(); s != kNoNode; s = slots_[s].next)
      if (slots_[s].owner != kGlobal) moving.emplace_back(slots_[s].owner, slots_[s].addr, s);
    std::sort(moving.begin(), moving.end());
    for (const auto& [owner, addr, s] : moving) set_owner(s, kGlobal);
    for (const auto& [owner, addr, s] : moving)  // still a superblock there, not merged into another
      if (slots_[s].alive && slots_[s].addr == addr && slots_[s].empty()) coalesce_global(s);
  }

  uint32_t first_slot() const {
    for (uint32_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].alive && slots_[s].prev == kNoNode) return s;
    return kNoNode;
  }

  // A new empty global superblock between slots prev and next.
  uint32_t add_superblock(Addr addr, uint64_t size, uint32_t prev, uint32_t next) {
    uint32_t s;
    if (!dead_.empty()) {
      s = dead_.back();
      dead_.pop_back();
    } else {
      s = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Superblock& sb = slots_[s];
    sb.addr = addr;
    sb.size = size;
    sb.owner = kGlobal;
    sb.prev = prev;
    sb.next = next;
    sb.alive = true;
    sb.bucket = -1;
    sb.free.assign(1, FreeRange{addr, size});  // keeps the capacity a reused slot had
    sb.largest = size;
    if (prev != kNoNode) slots_[prev].next = s;
    if (next != kNoNode) slots_[next].prev = s;
    index(s);
    return s;
  }
  void drop_slot(uint32_t s) {
    unindex(s);
    slots_[s].alive = false;
    dead_.push_back(s);
  }
  // Cuts the empty superblock s at `head` bytes; the tail becomes a new empty superblock.
  void split(uint32_t s, uint64_t head) {
    Superblock& sb = slots_[s];
    Addr tail = sb.addr + head;
    uint64_t tail_size = sb.size - head;
    sb.size = head;
    sb.free.assign(1, FreeRange{sb.addr, head});
    sb.largest = head;
    reindex(s);
    add_superblock(tail, tail_size, s, slots_[s].next);
  }
  void set_owner(uint32_t s, uint32_t owner) {
    unindex(s);
    slots_[s].owner = owner;
    index(s);
  }

  Device& device_;
  uint64_t arena_size_;
  std::optional<Addr> base_;
  uint64_t live_ = 0;
  std::vector<Superblock> slots_;  // every superblock (alive or a dead slot for reuse)
  std::vector<uint32_t> dead_;
  OwnerIndex global_index_;               // the global arena's first-fit index
  std::map<uint32_t, OwnerIndex> index_;  // first-fit index per stream arena
};

}  // namespace

constexpr SizeOption kArenaSize{"arena_size", 0,
                                "the global arena, taken whole at the first allocation "
                                "(0 = half the device capacity; half an H100's memory on an unlimited device)"};

PolicyInfo policy_info_rmm_arena() {
  return {.name = "rmm_arena",
          .summary =
              "RAPIDS RMM arena_memory_resource: global arena of superblocks, per-stream arenas, defragment on "
              "failure",
          .origin = "rapidsai/rmm cpp/include/rmm/mr/arena_memory_resource.hpp, detail/arena.hpp",
          .options = {kArenaSize},
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            uint64_t size = ctx.options.get(kArenaSize);
            if (size == 0) size = ctx.device.capacity().value_or(detail::kH100TotalMemory) / 2;
            size = size / kAlign * kAlign;
            if (size < kSuperblockMin) throw PolicyConfigError("rmm_arena: arena_size below the 1 MiB superblock");
            return std::make_unique<RmmArena>(ctx.device, size);
          },
          .alignment = kAlign,
          .preallocation =
              [](const PolicyOptions& o, std::optional<uint64_t> capacity) {
                uint64_t size = o.get(kArenaSize);
                if (size) return "arena of " + format_size(size);
                return "arena of half the device (" +
                       format_size(capacity.value_or(detail::kH100TotalMemory) / 2 / kAlign * kAlign) +
                       (capacity ? ")" : ", of an H100's memory on an unlimited device)");
              },
          .checked_against =
              "RMM v25.10.00 (rapidsai/rmm 7aaad1de), H100: one cudaMalloc of the arena and no OOM on the "
              "13 corpus op lists, as RMM; RMM's default arena is half the free memory, 0.65% smaller",
          .accuracy_note =
              "RMM's default arena is half the GPU's free memory, which a trace does not record: on an H100 "
              "0.65% below this model's half of total memory (set arena_size to the real one; "
              "docs/peers.md)"};
}

}  // namespace fraglab
