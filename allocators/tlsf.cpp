// tlsf: Two-Level Segregated Fit, constant-time good fit.
//
// Masmano, Ripoll, Crespo, Real, "TLSF: a New Dynamic Memory Allocator for Real-Time
// Systems" (ECRTS 2004), and the reference implementation (Matthew Conte's tlsf.c,
// mapping_insert / mapping_search / search_suitable_block). Free blocks sit on segregated
// lists indexed by two levels: the first level is floor(log2 size), the second splits
// each power-of-two range into 2^sl_log2 linear classes. A first-level bitmap and one
// second-level bitmap per first level say which lists are non-empty, so a suitable list
// is found with two find-first-set operations, independent of the number of free blocks.
// The search first rounds the request up to the next class boundary (mapping_search), so
// the head of any list found fits without a scan: a "good fit" that can pass over a block
// of exactly the right size sitting in the request's own class (and then grow the pool),
// the trade TLSF makes for O(1). Below 2^sl_log2 * align the classes are exact multiples
// of align (the reference's small-block range). Lists are LIFO, as in the reference.
//
// Blocks split on allocation and merge with free physical neighbours on free; that
// bookkeeping, and segment growth, is shared with the other fits
// (detail/coalescing_pool.h). This file is only the segregated index. The reference
// manages pools added up front (tlsf_add_pool); here the pool grows by device segments,
// and a segment is made at least as large as the rounded-up request: a segment of just
// the request's size would, once free, sit in the request's own class, which the
// rounded-up search skips, so a repeated large request would add a segment every time.
#include <bit>

#include "allocators/detail/coalescing_pool.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::BlockNode;

uint32_t floor_log2(uint64_t n) { return 63 - static_cast<uint32_t>(std::countl_zero(n)); }

class TlsfIndex {
 public:
  TlsfIndex(uint32_t sl_log2, uint64_t align)
      : sl_log2_(sl_log2), fl_shift_(sl_log2 + floor_log2(align)), small_size_(1ull << fl_shift_) {
    heads_.assign(kFirstLevels << sl_log2_, kNoNode);
  }

  void insert(uint32_t node, const BlockNode& b) {
    auto [fl, sl] = mapping_insert(b.size);
    if (node >= links_.size()) links_.resize(node + 1);
    uint32_t& head = heads_[list(fl, sl)];
    links_[node] = {kNoNode, head};
    if (head != kNoNode) links_[head].prev = node;
    head = node;
    fl_bitmap_ |= 1ull << fl;
    sl_bitmap_[fl] |= 1ull << sl;
  }

  void erase(uint32_t node, const BlockNode& b) {
    auto [fl, sl] = mapping_insert(b.size);
    Links& l = links_[node];
    if (l.prev != kNoNode)
      links_[l.prev].next = l.next;
    else
      heads_[list(fl, sl)] = l.next;
    if (l.next != kNoNode) links_[l.next].prev = l.prev;
    if (heads_[list(fl, sl)] == kNoNode) {
      sl_bitmap_[fl] &= ~(1ull << sl);
      if (!sl_bitmap_[fl]) fl_bitmap_ &= ~(1ull << fl);
    }
  }

  // mapping_search: the request rounded up so that every block of its class fits it.
  uint64_t searched_size(uint64_t size) const {
    if (size < small_size_) return size;
    uint64_t round = (1ull << (floor_log2(size) - sl_log2_)) - 1;
    return size > UINT64_MAX - round ? UINT64_MAX : (size + round) & ~round;
  }

  // search_suitable_block: the head of the first non-empty list at or above the class of
  // the rounded-up request; every block there is >= size.
  uint32_t find(uint64_t size) const {
    size = searched_size(size);
    if (size == UINT64_MAX) return kNoNode;
    auto [fl, sl] = mapping_insert(size);
    uint64_t sl_map = sl_bitmap_[fl] & (~0ull << sl);
    if (!sl_map) {
      uint64_t fl_map = fl + 1 < 64 ? fl_bitmap_ & (~0ull << (fl + 1)) : 0;
      if (!fl_map) return kNoNode;
      fl = static_cast<uint32_t>(std::countr_zero(fl_map));
      sl_map = sl_bitmap_[fl];
    }
    return heads_[list(fl, static_cast<uint32_t>(std::countr_zero(sl_map)))];
  }

  // mapping_insert: (first level, second level) of a block of `size` bytes.
  std::pair<uint32_t, uint32_t> mapping_insert(uint64_t size) const {
    if (size < small_size_) return {0, static_cast<uint32_t>(size / (small_size_ >> sl_log2_))};
    uint32_t fl = floor_log2(size);
    auto sl = static_cast<uint32_t>((size >> (fl - sl_log2_)) ^ (1ull << sl_log2_));
    return {fl - fl_shift_ + 1, sl};
  }

 private:
  static constexpr uint32_t kFirstLevels = 64;
  struct Links {
    uint32_t prev = kNoNode, next = kNoNode;
  };
  size_t list(uint32_t fl, uint32_t sl) const { return (static_cast<size_t>(fl) << sl_log2_) | sl; }

  uint32_t sl_log2_, fl_shift_;
  uint64_t small_size_;
  uint64_t fl_bitmap_ = 0;
  uint64_t sl_bitmap_[kFirstLevels] = {};
  std::vector<uint32_t> heads_;  // list heads, [fl << sl_log2 | sl]
  std::vector<Links> links_;     // free-list links, by block node
};

class Tlsf final : public Policy {
 public:
  Tlsf(Device& device, detail::PoolConfig config, uint32_t sl_log2)
      : pool_(device, config, TlsfIndex(sl_log2, config.align)) {}

  std::optional<Block> allocate(const AllocRequest& req) override { return pool_.allocate(req.size, req.stream); }
  void deallocate(const Block& block) override { pool_.deallocate(static_cast<uint32_t>(block.handle)); }
  void empty_cache() override { pool_.release_free_segments(); }

 private:
  detail::CoalescingPool<TlsfIndex> pool_;
};

}  // namespace

constexpr IntOption kSlLog2{"sl_log2", 5,
                            "log2 of the second-level classes per power of two (SL_INDEX_COUNT_LOG2, 1-6)"};

PolicyInfo policy_info_tlsf() {
  return {.name = "tlsf",
          .summary = "two-level segregated fit: O(1) good fit through first- and second-level bitmaps",
          .origin =
              "Masmano et al. 2004 \"TLSF: a New Dynamic Memory Allocator for Real-Time Systems\"; "
              "reference tlsf.c (M. Conte): mapping_insert, mapping_search, search_suitable_block",
          .options = detail::PoolConfig::option_specs({kSlLog2}),
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            auto config = detail::PoolConfig::from_options(ctx.options, "tlsf");
            int64_t sl_log2 = ctx.options.get(kSlLog2);
            if (sl_log2 < 1 || sl_log2 > 6) throw PolicyConfigError("tlsf: sl_log2 must be between 1 and 6");
            if (!std::has_single_bit(config.align)) throw PolicyConfigError("tlsf: align must be a power of two");
            return std::make_unique<Tlsf>(ctx.device, config, static_cast<uint32_t>(sl_log2));
          }};
}

}  // namespace fraglab
