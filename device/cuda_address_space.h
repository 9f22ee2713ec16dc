// CudaAddressSpace: where the CUDA driver puts cudaMalloc'd segments and cuMemAddressReserve'd
// ranges, as measured on an H100 (driver 580, CUDA 13; tools/cuda_addresses/ holds the probe, its
// op lists and what it returned). In a fresh process the model predicts every one of the 1175
// addresses the probe recorded (the device calls of every bundled recording and 12 synthetic
// sequences), relative to the first.
//
// The rules found:
//  - The driver hands out virtual address space in chunks: a multiple of 32 MiB, 32 MiB-aligned.
//  - cudaMalloc first looks for room in the chunks it already has, newest chunk first, lowest
//    address first inside a chunk (2 MiB-aligned for sizes of 2 MiB and more, 512 B below).
//  - Failing that it carves a new chunk (the size rounded up to 32 MiB) from free address space,
//    top-down: the highest free range that can hold it, at the highest aligned place in it. A
//    range is only taken when it holds the chunk plus 30 MiB (the alignment slack): an exactly
//    fitting hole is passed over. The segment sits at the chunk's bottom; the tail stays free.
//  - A chunk whose allocations are all freed goes back to free address space (and merges with its
//    free neighbours); its addresses are reused by later chunks.
//  - cuMemAddressReserve carves chunks bottom-up from a separate low region (first one at
//    0x302000000); their tails, too, take later cudaMallocs.
//  - A fresh context owns a 512 MiB chunk with two free stretches at its top (2 MiB at +414 MiB and
//    24 MiB at +488 MiB), which take the first small cudaMallocs.
//  - All of it lies between vmm_base and the context's chunk, below 2^48: a request that finds no
//    room there fails (the device is out of memory), as cudaMalloc's would.
// What no model of this kind can know: memory the process allocates outside the traced allocator
// (kernel modules loaded lazily, library workspaces) takes addresses too. Real PyTorch runs of the
// same program differ from each other in about a fifth of their segment addresses for this reason.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "device/address_space.h"
#include "device/address_table.h"
#include "device/tiered_map.h"

namespace fraglab {

struct CudaAddressLayout {
  uint64_t chunk = 32ull << 20;        // unit and alignment of the driver's address-space chunks
  uint64_t page = 2ull << 20;          // alignment of allocations of a page or more inside a chunk
  uint64_t small = 512;                // size granularity and alignment below a page
  Addr context_base = 0x7f0000000000;  // the fresh context's chunk; cudaMalloc chunks grow down from it
                                       // (context_base + context_size <= kAddressSpaceEnd)
  uint64_t context_size = 512ull << 20;
  std::vector<std::pair<uint64_t, uint64_t>> context_free = {{0x19e00000, 2ull << 20}, {0x1e800000, 24ull << 20}};
  Addr vmm_base = 0x302000000;  // the first cuMemAddressReserve; reserved ranges grow up from it
};

class CudaAddressSpace final : public AddressSpace {
 public:
  explicit CudaAddressSpace(CudaAddressLayout layout = {});

  std::optional<Addr> place_segment(uint64_t size) override;
  void free_segment(Addr addr) override { give_back(addr); }
  std::optional<Addr> place_range(uint64_t size) override;
  void free_range(Addr addr) override { give_back(addr); }
  // A recording's place: taken from a chunk's free tail or hole when it lies in one, else from free
  // address space as a chunk of exactly its size (no driver rule says more; no later cudaMalloc
  // fits in it).
  bool place_segment_at(Addr addr, uint64_t size) override { return place_at(addr, size); }
  bool place_range_at(Addr addr, uint64_t size) override { return place_at(addr, size); }

 private:
  using Age = uint64_t;  // chunks by creation order: the newest is searched first
  struct Gap {
    Addr begin;
    uint64_t size;
  };
  // Every cudaMalloc searches the chunks newest first and each one's gaps lowest address first,
  // so both are arrays in that order: a search reads contiguous memory, and the chunk filter
  // (free_bytes, gap_bound) skips most chunks without touching their gaps.
  struct Chunk {
    Addr base;
    uint64_t size;
    Age age;
    std::vector<Gap> gaps;  // free stretches inside the chunk, by address
    uint64_t free_bytes = 0;
    uint64_t gap_bound = 0;  // no gap is larger (exact after a search that found no room)
    uint32_t live = 0;       // allocations in it (the context's own chunk is pinned)
  };
  struct Allocation {
    uint64_t bytes;
    Age chunk;
  };
  // What a search reads of each chunk, apart (16 bytes a chunk): its age and the most it may hold
  // (min of free_bytes and gap_bound).
  struct ChunkKey {
    Age age;
    uint64_t room;
  };

  uint64_t need(uint64_t size) const;
  std::optional<Addr> fit_in_chunks(uint64_t size);
  static std::optional<Addr> fit_in(Chunk& chunk, uint64_t need, uint64_t align);
  static void take_from_gap(Chunk& chunk, size_t gap, Addr at, uint64_t bytes);
  std::optional<Addr> carve(uint64_t size, bool top_down);
  Addr new_chunk(Addr base, uint64_t csize, uint64_t used);
  bool place_at(Addr addr, uint64_t size);
  void take_free(Addr begin, uint64_t size);
  void add_free(Addr begin, uint64_t size);
  void give_back(Addr addr);
  size_t index_of_age(Age age) const;
  void refresh(size_t index);

  CudaAddressLayout layout_;
  Age next_age_ = 0;
  std::vector<Chunk> chunks_;             // by age, oldest first
  std::vector<ChunkKey> keys_;            // chunks_[i]'s, at i
  AddressTable<Allocation> allocations_;  // address -> bytes taken and chunk
  TieredMap<Addr, uint64_t> free_;        // free address space (begin -> size)
};

}  // namespace fraglab
