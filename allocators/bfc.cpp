// bfc: TensorFlow's best-fit-with-coalescing allocator (the GPU allocator of TF and XLA).
//
// Models tensorflow/tsl/framework/bfc_allocator.{h,cc} (BFCAllocator):
//  - sizes round up to 256 B (kMinAllocationSize); 21 bins, bin b holding free chunks of
//    [256 << b, 256 << (b+1)) (the last bin everything larger), each ordered by (size, address);
//  - FindChunkPtr: from the request's bin upwards, the smallest chunk that fits; it is split
//    when it is at least twice the request or the remainder is at least
//    max_internal_fragmentation (128 MiB, or fragmentation_fraction * memory_limit);
//  - freed chunks merge with free neighbours in their region (TryToCoalesce);
//  - Extend: with allow_growth the region size starts at 2 MiB and doubles (it is doubled
//    until the request fits, else doubled after each region), capped by what is left of
//    memory_limit; a failed region allocation backs off by 0.9 until it fits the request,
//    once per allocator lifetime (started_backpedal_);
//  - on failure, DeallocateFreeRegions (garbage_collection, TF_ENABLE_GPU_GARBAGE_COLLECTION)
//    returns wholly free regions and Extend is tried again.
// Not modelled: the timestamped (freed_at_count) chunks of the stream-executor path and
// region coalescing (only TF's VMM sub-allocator supports it; the default GPU one does not).
// BFC has no empty_cache; here it returns the wholly free regions, as garbage collection does.
// Checked against XLA's BFC through JAX 0.11.2 on an H100 by tools/peers/jax_bfc_reference.py
// (docs/peers.md): equal peak pool bytes and peak bytes in use on every corpus op list.
#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "allocators/detail/block_list.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

using detail::BlockList;
using detail::round_up;

constexpr uint64_t kMinAllocationSize = 256;
constexpr int kNumBins = 21;

struct BfcOptions {
  uint64_t memory_limit;
  bool allow_growth;
  bool garbage_collection;
  double fragmentation_fraction;
};

class Bfc final : public Policy {
 public:
  Bfc(Device& device, const BfcOptions& opts) : device_(device), opts_(opts) {
    curr_region_bytes_ = round_up(
        opts.allow_growth ? std::min<uint64_t>(opts.memory_limit, 2ull << 20) : opts.memory_limit, kMinAllocationSize);
    max_internal_fragmentation_ =
        opts.fragmentation_fraction > 0
            ? static_cast<uint64_t>(opts.fragmentation_fraction * static_cast<double>(opts.memory_limit))
            : 128ull << 20;
  }

  static int bin_for_size(uint64_t bytes) {
    uint64_t v = std::max(bytes, kMinAllocationSize) >> 8;
    return std::min(kNumBins - 1, static_cast<int>(std::bit_width(v)) - 1);
  }

  std::optional<Block> allocate(const AllocRequest& req) override {
    // BFC refuses 0 bytes; a recorded 0-byte tensor still gets the minimum chunk here.
    uint64_t rounded = round_up(std::max<uint64_t>(req.size, 1), kMinAllocationSize);
    uint32_t node = find_chunk(rounded);
    if (node == kNoNode && extend(rounded, req.stream)) node = find_chunk(rounded);
    if (node == kNoNode && deallocate_free_regions(rounded) && extend(rounded, req.stream)) node = find_chunk(rounded);
    if (node == kNoNode) return std::nullopt;
    return Block{chunks_[node].addr, chunks_[node].size, node};
  }

  void deallocate(const Block& block) override {
    auto h = static_cast<uint32_t>(block.handle);
    chunks_[h].free = true;
    insert_free(coalesce(h));
  }

  void empty_cache() override { release_regions(free_regions()); }

  uint64_t region_allocation_bytes() const { return curr_region_bytes_; }

 private:
  using BinKey = std::tuple<uint64_t, Addr, uint32_t>;  // (size, address, chunk): the bin order

  uint32_t find_chunk(uint64_t rounded) {
    for (int b = bin_for_size(rounded); b < kNumBins; ++b) {
      auto it = bins_[b].lower_bound(BinKey{rounded, 0, 0});
      if (it == bins_[b].end()) continue;
      uint32_t h = std::get<2>(*it);
      bins_[b].erase(it);
      chunks_[h].free = false;
      uint64_t size = chunks_[h].size;
      if (size >= rounded * 2 || size - rounded >= max_internal_fragmentation_) {
        uint32_t rest = chunks_.split(h, rounded);
        chunks_[rest].free = true;
        insert_free(rest);
      }
      return h;
    }
    return kNoNode;
  }

  bool extend(uint64_t rounded, StreamIndex stream) {
    uint64_t available = (opts_.memory_limit - total_region_bytes_) / kMinAllocationSize * kMinAllocationSize;
    if (rounded > available) return false;
    bool increased = false;
    while (rounded > curr_region_bytes_) {
      curr_region_bytes_ *= 2;
      increased = true;
    }
    uint64_t bytes = std::min(curr_region_bytes_, available);
    auto addr = device_.allocate_segment(bytes, stream);
    if (!addr && !started_backpedal_) {
      started_backpedal_ = true;  // TF backs off only once per allocator
      while (!addr) {
        bytes = round_up(static_cast<uint64_t>(static_cast<double>(bytes) * 0.9), kMinAllocationSize);
        if (bytes < rounded) break;
        addr = device_.allocate_segment(bytes, stream);
      }
    }
    if (!addr) return false;
    if (!increased) curr_region_bytes_ *= 2;
    total_region_bytes_ += bytes;
    uint32_t h = chunks_.create(*addr, bytes, 0, stream);
    chunks_[h].free = true;
    insert_free(h);
    return true;
  }

  // Regions whose single chunk is free (a region with no use is one merged chunk).
  std::vector<uint32_t> free_regions() const {
    std::vector<uint32_t> out;
    for (const auto& bin : bins_)
      for (const auto& key : bin)
        if (chunks_.is_whole_segment(std::get<2>(key))) out.push_back(std::get<2>(key));
    return out;
  }

  bool deallocate_free_regions(uint64_t rounded) {
    if (!opts_.garbage_collection) return false;
    auto regions = free_regions();
    uint64_t free_bytes = 0;
    for (uint32_t h : regions) free_bytes += chunks_[h].size;
    if (free_bytes == 0) return false;
    // The source's rough check that freeing can help at all.
    if (rounded > opts_.memory_limit - total_region_bytes_ + free_bytes) return false;
    release_regions(regions);
    return true;
  }

  void release_regions(const std::vector<uint32_t>& regions) {
    for (uint32_t h : regions) {
      remove_free(h);
      device_.free_segment(chunks_[h].addr, chunks_[h].size);
      total_region_bytes_ -= chunks_[h].size;
      chunks_.destroy(h);
    }
  }

  uint32_t coalesce(uint32_t h) {
    return chunks_.merge_with_free_neighbours(h, [this](uint32_t n) {
      if (!chunks_[n].free) return false;
      remove_free(n);
      return true;
    });
  }

  void insert_free(uint32_t h) { bins_[bin_for_size(chunks_[h].size)].emplace(chunks_[h].size, chunks_[h].addr, h); }
  void remove_free(uint32_t h) {
    bins_[bin_for_size(chunks_[h].size)].erase(BinKey{chunks_[h].size, chunks_[h].addr, h});
  }

  Device& device_;
  BfcOptions opts_;
  uint64_t curr_region_bytes_ = 0;
  uint64_t total_region_bytes_ = 0;
  uint64_t max_internal_fragmentation_ = 0;
  bool started_backpedal_ = false;
  BlockList chunks_;
  std::array<std::set<BinKey>, kNumBins> bins_;
};

}  // namespace

// For tests: the source's BinNumForSize.
int bfc_bin_for_size(uint64_t bytes) { return Bfc::bin_for_size(bytes); }

constexpr SizeOption kMemoryLimit{"memory_limit", 0,
                                  "bytes BFC may hold (total_memory); 0 = the device capacity, else unlimited"};
constexpr BoolOption kAllowGrowth{
    "allow_growth", true, "regions start at 2 MiB and double; false = one region of memory_limit (TF's default)"};
constexpr BoolOption kGarbageCollection{"garbage_collection", true,
                                        "free wholly free regions and retry when out of memory"};
constexpr DoubleOption kFragmentationFraction{"fragmentation_fraction", 0,
                                              "split threshold = this * memory_limit; 0 = 128 MiB"};

PolicyInfo policy_info_bfc() {
  return {
      .name = "bfc",
      .summary = "TensorFlow/XLA BFC: 21 power-of-two bins, best fit, split, coalesce, growing regions, GC on OOM",
      .origin = "tensorflow/tsl/framework/bfc_allocator.{h,cc} (BFCAllocator)",
      .options = {kMemoryLimit, kAllowGrowth, kGarbageCollection, kFragmentationFraction},
      .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
        BfcOptions o;
        o.memory_limit = ctx.options.get(kMemoryLimit);
        if (o.memory_limit == 0)
          o.memory_limit = ctx.device.capacity().value_or(std::numeric_limits<uint64_t>::max() / 4);
        o.allow_growth = ctx.options.get(kAllowGrowth);
        o.garbage_collection = ctx.options.get(kGarbageCollection);
        o.fragmentation_fraction = ctx.options.get(kFragmentationFraction);
        if (o.fragmentation_fraction < 0 || o.fragmentation_fraction > 1)
          throw PolicyConfigError("bfc: fragmentation_fraction must lie in [0, 1]");
        if (o.memory_limit < kMinAllocationSize) throw PolicyConfigError("bfc: memory_limit below 256 B");
        return std::make_unique<Bfc>(ctx.device, o);
      },
      .alignment = kMinAllocationSize,
      .checked_against =
          "XLA's BFC through JAX 0.11.2 (jaxlib's XLA), H100: peak reserved and in use equal on the 13 corpus op lists"};
}

}  // namespace fraglab
