// slab: segregated size classes served from slabs, large requests from a best-fit pool.
//
// The design of the modern general-purpose allocators, scaled to GPU memory:
//  - size classes as in jemalloc (include/jemalloc/internal/sc.h, "4 classes per
//    doubling", LG_SIZE_CLASS_GROUP = 2) with a 512-byte quantum: 512, 1024, 1536, 2048,
//    then 2560, 3072, 3584, 4096, 5120, ... each group of four spaced by a quarter of its
//    power of two, so rounding wastes at most 20% (25% of the group's base) of a request;
//  - every small class is served from slabs (jemalloc's slabs, mimalloc's pages,
//    src/page.c): one device segment of `slab` bytes carved into equal slots of that
//    class; the lowest free slot of the lowest-address slab that has room is taken
//    (jemalloc keeps a bin's non-full slabs in a heap ordered by age, then address,
//    bin.h slabs_nonfull, and takes a slab's first free region with bitmap_sfu), which
//    keeps the low slabs full and lets the high ones drain;
//  - requests above `large_threshold` fall through to a coalescing best-fit pool
//    (as jemalloc's large extents do; detail/coalescing_pool.h with detail/size_bins.h).
// Slots never split or merge: internal fragmentation (class rounding, slab tails: a slab
// holds floor(slab / class) slots, so two 896 KiB slots leave 256 KiB of a 2 MiB slab) is
// bounded, and external fragmentation shows up as partly used slabs that cannot be
// returned. Empty slabs stay cached until empty_cache, like the other caching policies.
#include <bit>
#include <set>

#include "allocators/detail/coalescing_pool.h"
#include "allocators/detail/pool_policy.h"
#include "allocators/detail/size_bins.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::BlockNode;
using detail::SizeBins;

uint32_t floor_log2(uint64_t n) { return 63 - static_cast<uint32_t>(std::countl_zero(n)); }

// jemalloc-style size classes with 4 classes per doubling above 4 quanta.
class SizeClasses {
 public:
  explicit SizeClasses(uint64_t quantum) : lg_quantum_(floor_log2(quantum)) {}

  // Index of the smallest class >= n (n >= 1).
  uint32_t index_of(uint64_t n) const {
    uint64_t q = 1ull << lg_quantum_;
    if (n <= 4 * q) return static_cast<uint32_t>((n + q - 1) / q) - 1;
    uint32_t lg = floor_log2(n - 1);                           // the group: (2^lg, 2^(lg+1)]
    uint64_t delta = 1ull << (lg - 2);                         // four classes per group
    uint64_t step = ((n - (1ull << lg)) + delta - 1) / delta;  // 1..4
    return 4 + (lg - (lg_quantum_ + 2)) * 4 + static_cast<uint32_t>(step) - 1;
  }
  uint64_t size_of(uint32_t index) const {
    if (index < 4) return static_cast<uint64_t>(index + 1) << lg_quantum_;
    uint32_t lg = lg_quantum_ + 2 + (index - 4) / 4;
    return (1ull << lg) + static_cast<uint64_t>((index - 4) % 4 + 1) * (1ull << (lg - 2));
  }

 private:
  uint32_t lg_quantum_;
};

class Slab final : public Policy {
 public:
  Slab(Device& device, detail::PoolConfig pool_config, uint64_t slab_bytes, uint64_t large_threshold)
      : device_(device),
        classes_(pool_config.align),
        slab_bytes_(slab_bytes),
        large_threshold_(large_threshold),
        nonfull_(classes_.index_of(large_threshold) + 1),
        large_(device, pool_config) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    uint64_t size = std::max<uint64_t>(req.size, 1);
    if (size > large_threshold_) {
      auto block = large_.allocate(size, req.stream);
      if (!block) {  // the device is full: empty slabs may be what holds it
        release_empty_slabs();
        block = large_.allocate(size, req.stream);
      }
      return block;
    }
    uint32_t cls = classes_.index_of(size);
    if (nonfull_[cls].empty() && !new_slab(cls, req.stream)) {
      empty_cache();
      if (!new_slab(cls, req.stream)) return std::nullopt;
    }
    uint32_t s = nonfull_[cls].begin()->second;
    uint32_t slot = take_slot(s);
    return Block{slabs_[s].base + slot * slabs_[s].slot_size, slabs_[s].slot_size, kSmall | (uint64_t{s} << 24) | slot};
  }

  void deallocate(const Block& block) override {
    if (!(block.handle & kSmall)) {
      large_.deallocate(static_cast<uint32_t>(block.handle));
      return;
    }
    auto s = static_cast<uint32_t>((block.handle & ~kSmall) >> 24);
    auto slot = static_cast<uint32_t>(block.handle & 0xFFFFFF);
    SlabState& slab = slabs_[s];
    if (slab.used == slab.slots) nonfull_[slab.cls].emplace(slab.base, s);
    slab.free_bits[slot / 64] |= 1ull << (slot % 64);
    slab.first_free_word = std::min(slab.first_free_word, slot / 64);
    --slab.used;
  }

  void empty_cache() override {
    release_empty_slabs();
    large_.release_free_segments();
  }

 private:
  static constexpr uint64_t kSmall = 1ull << 63;  // handle tag: slab index << 24 | slot

  struct SlabState {
    Addr base = 0;
    uint64_t slot_size = 0;
    uint32_t cls = 0, slots = 0, used = 0;
    uint32_t first_free_word = 0;     // no free slot below this bitmap word
    std::vector<uint64_t> free_bits;  // bit set: slot free
    bool live = false;
  };

  bool new_slab(uint32_t cls, StreamIndex stream) {
    auto base = device_.allocate_segment(slab_bytes_, stream);
    if (!base) return false;
    uint32_t s;
    if (!dead_.empty()) {
      s = dead_.back();
      dead_.pop_back();
    } else {
      s = static_cast<uint32_t>(slabs_.size());
      slabs_.emplace_back();
    }
    SlabState& slab = slabs_[s];
    slab.base = *base;
    slab.slot_size = classes_.size_of(cls);
    slab.cls = cls;
    slab.slots = static_cast<uint32_t>(slab_bytes_ / slab.slot_size);
    slab.used = 0;
    slab.first_free_word = 0;
    slab.free_bits.assign((slab.slots + 63) / 64, ~0ull);
    if (slab.slots % 64) slab.free_bits.back() = (1ull << (slab.slots % 64)) - 1;
    slab.live = true;
    nonfull_[cls].emplace(slab.base, s);
    return true;
  }

  // The lowest free slot of slab s (which has one), marked used.
  uint32_t take_slot(uint32_t s) {
    SlabState& slab = slabs_[s];
    uint32_t w = slab.first_free_word;
    while (slab.free_bits[w] == 0) ++w;
    slab.first_free_word = w;
    auto bit = static_cast<uint32_t>(std::countr_zero(slab.free_bits[w]));
    slab.free_bits[w] &= slab.free_bits[w] - 1;
    if (++slab.used == slab.slots) nonfull_[slab.cls].erase({slab.base, s});
    return w * 64 + bit;
  }

  void release_empty_slabs() {
    for (uint32_t s = 0; s < slabs_.size(); ++s) {
      SlabState& slab = slabs_[s];
      if (!slab.live || slab.used) continue;
      nonfull_[slab.cls].erase({slab.base, s});
      device_.free_segment(slab.base, slab_bytes_);
      slab.live = false;
      slab.free_bits.clear();
      dead_.push_back(s);
    }
  }

  Device& device_;
  SizeClasses classes_;
  uint64_t slab_bytes_, large_threshold_;
  std::vector<SlabState> slabs_;
  std::vector<uint32_t> dead_;                                // slab slots to reuse
  std::vector<std::set<std::pair<Addr, uint32_t>>> nonfull_;  // per class: slabs with a free slot, by address
  detail::CoalescingPool<detail::BestFitIndex> large_;        // best fit by (size, address)
};

}  // namespace

constexpr SizeOption kSlab{"slab", 2ull << 20, "bytes of one slab (one device segment carved into equal slots)"};
constexpr SizeOption kLargeThreshold{"large_threshold", 1ull << 20,
                                     "requests above this go to the best-fit pool, the rest to slabs"};

PolicyInfo policy_info_slab() {
  return {.name = "slab",
          .summary =
              "jemalloc-style size classes (4 per doubling) in slabs; large requests from a coalescing "
              "best-fit pool",
          .origin =
              "jemalloc include/jemalloc/internal/sc.h, src/sc.c (size classes), bin.h, bitmap.h; mimalloc "
              "src/page.c; Wilson et al. 1995 3.6 (segregated storage)",
          .options = detail::PoolConfig::option_specs({kSlab, kLargeThreshold}),
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            auto config = detail::PoolConfig::from_options(ctx.options, "slab");
            uint64_t slab = ctx.options.get(kSlab);
            uint64_t threshold = ctx.options.get(kLargeThreshold);
            if (!std::has_single_bit(config.align)) throw PolicyConfigError("slab: align must be a power of two");
            SizeClasses classes(config.align);
            if (threshold < config.align || classes.size_of(classes.index_of(threshold)) > slab)
              throw PolicyConfigError("slab: large_threshold must be at least align, and its class fit in a slab");
            if (slab / config.align >= (1ull << 24))
              throw PolicyConfigError("slab: a slab may hold at most 2^24 slots of align bytes");
            return std::make_unique<Slab>(ctx.device, config, slab, threshold);
          }};
}

}  // namespace fraglab
