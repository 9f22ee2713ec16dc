// gmlake: GPU memory defragmentation by virtual memory stitching.
//
// Models GMLake (Guo et al., "GMLake: Efficient and Transparent GPU Memory Defragmentation
// for Large-scale DNN Training with Virtual Memory Stitching", ASPLOS 2024), which replaces
// PyTorch's caching allocator for large blocks:
//  - physical memory comes in chunks of the VMM granularity (2 MiB); a pBlock is a run of
//    chunks mapped at its own virtual range (cuMemCreate + cuMemMap), sizes round up to the
//    granularity;
//  - an sBlock is a virtual range onto which several free pBlocks are mapped a second time,
//    back to back (Device::alias_pages): one contiguous block over non-contiguous physical
//    chunks, costing no new physical memory;
//  - allocation takes a free pBlock or sBlock of exactly the (rounded) size, else the best
//    fitting free pBlock, split to size (cached sBlocks that show it are released first);
//    when no pBlock fits, free pBlocks are stitched, largest first, into a new sBlock (the
//    last one split to fit exactly), and only the part the free pBlocks cannot cover is new
//    physical memory (a new pBlock stitched with them). A larger free sBlock is not taken:
//    stitching its parts anew wastes nothing;
//  - stitched sBlocks stay cached: the next request of that size reuses them whole, which is
//    what makes iterative training converge to no new allocations;
//  - empty_cache releases free sBlocks (unmapping their aliases) and free pBlocks; a failed
//    mapping does so and retries once.
// Requests below small_size go to a PyTorch-style small pool of 2 MiB segments (best fit,
// split, merge), as GMLake leaves small blocks to PyTorch's allocator. The number of cached
// sBlocks is bounded (max_sblocks): past it, the free ones are released.
#include <algorithm>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "allocators/detail/block_list.h"
#include "allocators/detail/ordered_keys.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::BlockList;
using detail::round_up;

enum Kind : uint64_t { kPBlock = 0, kSBlock = 1, kSmall = 2 };

struct PBlock {
  Addr addr = 0;
  uint64_t size = 0;
  uint32_t range = 0;   // the virtual range it was mapped into (shared after splits)
  bool in_use = false;  // allocated directly or through an allocated sBlock
  bool alive = false;
  std::vector<uint32_t> sblocks;  // cached sBlocks that show it
};

struct SBlock {
  Addr addr = 0;
  uint64_t size = 0;
  std::vector<uint32_t> parts;  // pBlocks in address order of the stitched range
  uint32_t busy_parts = 0;      // parts in use (by it or by anything else)
  bool in_use = false;
  bool alive = false;
};

struct Range {
  Addr addr = 0;
  uint64_t size = 0;
  uint32_t pblocks = 0;  // live pBlocks inside
};

class GmLake final : public Policy {
 public:
  GmLake(Device& device, uint64_t small_size, uint64_t small_segment, size_t max_sblocks)
      : device_(device),
        g_(device.granularity()),
        small_size_(small_size),
        small_segment_(small_segment),
        max_sblocks_(max_sblocks) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    if (req.size < small_size_) return allocate_small(req);
    uint64_t size = round_up(std::max<uint64_t>(req.size, 1), g_);
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (auto b = best_fit(size)) return b;
      if (auto b = stitch(size, req.stream)) return b;
      release_cache();
    }
    return std::nullopt;
  }

  void deallocate(const Block& block) override {
    auto id = static_cast<uint32_t>(block.handle);
    switch (block.handle >> 32) {
      case kPBlock:
        set_pblock_use(id, false);
        break;
      case kSBlock:
        sblocks_[id].in_use = false;
        for (uint32_t p : sblocks_[id].parts) set_pblock_use(p, false);
        break;
      default:
        free_small(id);
    }
  }

  void empty_cache() override {
    release_cache();
    release_small_segments();
  }

 private:
  // A free pBlock in best-fit order: (size, id). OrderedKeys (size bins, the order a std::set
  // of the pairs keeps) rather than a node-based tree: pBlocks change hands at every request.
  struct Candidate {
    uint64_t hi;  // size
    uint64_t lo;  // id
  };

  // ---- large blocks: pBlocks and sBlocks ----

  std::optional<Block> best_fit(uint64_t size) {
    auto p = free_p_.lower_bound(Candidate{size, 0});
    if (p == free_p_.end() || p->hi != size)
      if (uint32_t s = free_sblock_of(size); s != kNoNode) return take_sblock(s);
    if (p == free_p_.end()) return std::nullopt;
    auto id = static_cast<uint32_t>(p->lo);
    if (p->hi > size) split_pblock(id, size);
    set_pblock_use(id, true);
    return Block{pblocks_[id].addr, pblocks_[id].size, (kPBlock << 32) | id};
  }

  // The lowest-numbered cached sBlock of exactly `size` bytes whose parts are all free.
  uint32_t free_sblock_of(uint64_t size) const {
    auto found = sblocks_by_size_.find(size);
    if (found == sblocks_by_size_.end()) return kNoNode;
    for (uint32_t id : found->second)
      if (is_free(sblocks_[id])) return id;
    return kNoNode;
  }
  static bool is_free(const SBlock& s) { return !s.in_use && s.busy_parts == 0; }

  Block take_sblock(uint32_t id) {
    SBlock& s = sblocks_[id];
    s.in_use = true;
    for (uint32_t p : s.parts) set_pblock_use(p, true);
    return Block{s.addr, s.size, (kSBlock << 32) | id};
  }

  // No single free block fits: free pBlocks, largest first, plus new memory for the rest.
  std::optional<Block> stitch(uint64_t size, StreamIndex stream) {
    std::vector<uint32_t> parts;
    uint64_t covered = 0;
    for (auto it = free_p_.end(); it != free_p_.begin() && covered < size;) {
      --it;
      parts.push_back(static_cast<uint32_t>(it->lo));
      covered += it->hi;
    }
    uint32_t fresh = kNoNode;
    if (covered < size) {
      fresh = new_pblock(size - covered, stream);
      if (fresh == kNoNode) return std::nullopt;
      parts.push_back(fresh);
    } else if (covered > size) {
      uint32_t last = parts.back();  // the smallest taken: trim it so the parts add up exactly
      split_pblock(last, pblocks_[last].size - (covered - size));
    }
    if (parts.size() == 1) {  // nothing to stitch: a plain new pBlock
      set_pblock_use(parts[0], true);
      return Block{pblocks_[parts[0]].addr, pblocks_[parts[0]].size, (kPBlock << 32) | parts[0]};
    }
    uint64_t total = 0;
    for (uint32_t p : parts) total += pblocks_[p].size;
    auto addr = device_.reserve_range(total);
    if (!addr) return std::nullopt;
    Addr at = *addr;
    for (uint32_t p : parts) {
      if (!device_.alias_pages(at, pblocks_[p].addr, pblocks_[p].size))
        throw std::logic_error("gmlake: the device does not support alias_pages");
      at += pblocks_[p].size;
    }
    uint32_t id = new_sblock(*addr, total, parts);
    if (live_sblocks_ > max_sblocks_) release_free_sblocks(id);
    return take_sblock(id);
  }

  uint32_t new_pblock(uint64_t size, StreamIndex stream) {
    auto addr = device_.reserve_range(size);
    if (!addr) return kNoNode;
    if (!device_.map_pages(*addr, size, stream)) {
      device_.release_range(*addr, size);
      return kNoNode;
    }
    ranges_.push_back(Range{*addr, size, 0});
    return add_pblock(*addr, size, static_cast<uint32_t>(ranges_.size() - 1));
  }

  uint32_t add_pblock(Addr addr, uint64_t size, uint32_t range) {
    PBlock p;
    p.addr = addr;
    p.size = size;
    p.range = range;
    p.alive = true;
    pblocks_.push_back(p);
    ++ranges_[range].pblocks;
    auto id = static_cast<uint32_t>(pblocks_.size() - 1);
    free_p_.insert(Candidate{size, id});
    return id;
  }

  // Cuts a free pBlock at `keep` bytes; the tail becomes a free pBlock. The cached sBlocks
  // that show it no longer match its pieces, so they go first (they are free: it is).
  void split_pblock(uint32_t id, uint64_t keep) {
    while (!pblocks_[id].sblocks.empty()) release_sblock(pblocks_[id].sblocks.back());
    free_p_.erase(Candidate{pblocks_[id].size, id});
    Addr tail = pblocks_[id].addr + keep;
    uint64_t tail_size = pblocks_[id].size - keep;
    pblocks_[id].size = keep;
    free_p_.insert(Candidate{keep, id});
    add_pblock(tail, tail_size, pblocks_[id].range);
  }

  uint32_t new_sblock(Addr addr, uint64_t size, const std::vector<uint32_t>& parts) {
    SBlock s;
    s.addr = addr;
    s.size = size;
    s.parts = parts;
    s.alive = true;
    uint32_t id;
    if (!dead_sblocks_.empty()) {  // reuse the slot of a released one
      id = dead_sblocks_.back();
      dead_sblocks_.pop_back();
      sblocks_[id] = s;
    } else {
      sblocks_.push_back(s);
      id = static_cast<uint32_t>(sblocks_.size() - 1);
    }
    for (uint32_t p : parts) {
      pblocks_[p].sblocks.push_back(id);
      if (pblocks_[p].in_use) ++sblocks_[id].busy_parts;
    }
    auto& same = sblocks_by_size_[size];
    same.insert(std::lower_bound(same.begin(), same.end(), id), id);
    ++live_sblocks_;
    return id;
  }

  // A pBlock changes hands; the sBlocks that show it become usable or unusable with it.
  void set_pblock_use(uint32_t id, bool use) {
    PBlock& p = pblocks_[id];
    p.in_use = use;
    if (use)
      free_p_.erase(Candidate{p.size, id});
    else
      free_p_.insert(Candidate{p.size, id});
    for (uint32_t s : p.sblocks) sblocks_[s].busy_parts += use ? 1 : -1;
  }

  void release_sblock(uint32_t id) {
    SBlock& s = sblocks_[id];
    auto same = sblocks_by_size_.find(s.size);
    same->second.erase(std::lower_bound(same->second.begin(), same->second.end(), id));
    if (same->second.empty()) sblocks_by_size_.erase(same);
    device_.unmap_pages(s.addr, s.size);
    device_.release_range(s.addr, s.size);
    for (uint32_t p : s.parts) {
      auto& refs = pblocks_[p].sblocks;
      refs.erase(std::find(refs.begin(), refs.end(), id));
    }
    s.alive = false;
    s.parts.clear();
    dead_sblocks_.push_back(id);
    --live_sblocks_;
  }

  void release_free_sblocks(uint32_t keep) {
    for (uint32_t id = 0; id < sblocks_.size(); ++id)
      if (id != keep && sblocks_[id].alive && !sblocks_[id].in_use && sblocks_[id].busy_parts == 0) release_sblock(id);
  }

  void release_cache() {
    release_free_sblocks(kNoNode);
    for (uint32_t id = 0; id < pblocks_.size(); ++id) {
      if (!pblocks_[id].alive || pblocks_[id].in_use) continue;
      // A cached sBlock can show a free pBlock while another of its parts is in use (release_free_sblocks
      // keeps it): it goes with the pBlock, or freeing that other part would hand the dead pBlock back to
      // free_p_ and a later stitch would alias pages no longer mapped. (Not in use itself: then its parts
      // would all be.)
      while (!pblocks_[id].sblocks.empty()) release_sblock(pblocks_[id].sblocks.back());
      PBlock& p = pblocks_[id];
      free_p_.erase(Candidate{p.size, id});
      device_.unmap_pages(p.addr, p.size);
      p.alive = false;
      Range& r = ranges_[p.range];
      if (--r.pblocks == 0) device_.release_range(r.addr, r.size);
    }
  }

  // ---- small blocks: a PyTorch-style small pool ----

  std::optional<Block> allocate_small(const AllocRequest& req) {
    uint64_t size = round_up(std::max<uint64_t>(req.size, 1), 512);
    auto it = small_free_.lower_bound(SmallKey{size, 0, 0});
    uint32_t node;
    if (it != small_free_.end()) {
      node = it->node;
      small_free_.erase(it);
    } else {
      uint64_t seg = std::max(small_segment_, round_up(size, small_segment_));
      auto addr = device_.allocate_segment(seg, req.stream);
      if (!addr) {
        empty_cache();
        addr = device_.allocate_segment(seg, req.stream);
        if (!addr) return std::nullopt;
      }
      node = small_.create(*addr, seg, 0, req.stream);
    }
    small_[node].free = false;
    if (small_[node].size - size >= 512) {
      uint32_t rest = small_.split(node, size);
      small_[rest].free = true;
      small_free_.insert(SmallKey{small_[rest].size, small_[rest].addr, rest});
    }
    return Block{small_[node].addr, small_[node].size, (kSmall << 32) | node};
  }

  void free_small(uint32_t node) {
    node = small_.merge_with_free_neighbours(node, [this](uint32_t n) {
      if (!small_[n].free) return false;
      small_free_.erase(SmallKey{small_[n].size, small_[n].addr, n});
      return true;
    });
    small_[node].free = true;
    small_free_.insert(SmallKey{small_[node].size, small_[node].addr, node});
  }

  void release_small_segments() {
    std::vector<SmallKey> whole;  // in the pool's order, which is the order of the device calls
    for (const SmallKey& k : small_free_)
      if (small_.is_whole_segment(k.node)) whole.push_back(k);
    for (const SmallKey& k : whole) {
      small_free_.erase(k);
      device_.free_segment(small_[k.node].addr, small_[k.node].size);
      small_.destroy(k.node);
    }
  }

  struct SmallKey {
    uint64_t hi;  // size
    uint64_t lo;  // address
    uint32_t node;
  };

  Device& device_;
  uint64_t g_, small_size_, small_segment_;
  size_t max_sblocks_;
  size_t live_sblocks_ = 0;
  std::vector<PBlock> pblocks_;
  std::vector<SBlock> sblocks_;
  std::vector<Range> ranges_;
  std::vector<uint32_t> dead_sblocks_;
  detail::OrderedKeys<Candidate> free_p_;  // free pBlocks
  // Cached sBlocks by size, each list in id order. Whether one is free is read off its counters
  // when a request of its size comes: keeping a set of the free ones cost a tree update for
  // every cached sBlock that shows a pBlock changing hands.
  std::unordered_map<uint64_t, std::vector<uint32_t>> sblocks_by_size_;
  BlockList small_;
  detail::OrderedKeys<SmallKey> small_free_;  // free small blocks by (size, address)
};

}  // namespace

constexpr SizeOption kSmallSize{"small_size", 1ull << 20, "requests below this go to the small pool", kMaxOptionAlign};
constexpr SizeOption kSmallSegment{"small_segment", 2ull << 20, "segment size of the small pool", kMaxOptionAlign};
constexpr IntOption kMaxSblocks{"max_sblocks", 4096, "stitched blocks cached before the free ones are released", 1,
                                1 << 24};

PolicyInfo policy_info_gmlake() {
  return {.name = "gmlake",
          .summary =
              "GMLake: 2 MiB physical chunks (pBlocks) stitched into contiguous virtual blocks (sBlocks) via "
              "VMM aliasing",
          .origin =
              "Guo et al., \"GMLake: Efficient and Transparent GPU Memory Defragmentation for Large-scale DNN "
              "Training with Virtual Memory Stitching\", ASPLOS 2024",
          .options = {kSmallSize, kSmallSegment, kMaxSblocks},
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            uint64_t small_size = ctx.options.get(kSmallSize);
            uint64_t small_segment = ctx.options.get(kSmallSegment);
            int64_t max_sblocks = ctx.options.get(kMaxSblocks);
            if (small_segment < small_size || small_segment % 512 || small_segment == 0)
              throw PolicyConfigError("gmlake: small_segment must be a multiple of 512 B and >= small_size");
            if (max_sblocks < 1) throw PolicyConfigError("gmlake: max_sblocks must be positive");
            return std::make_unique<GmLake>(ctx.device, small_size, small_segment, static_cast<size_t>(max_sblocks));
          }};
}

}  // namespace fraglab
