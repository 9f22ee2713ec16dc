// The device interface: the only way a policy obtains memory.
//
// It offers what CUDA offers an allocator, in two families:
//  - contiguous segments, like cudaMalloc/cudaFree;
//  - virtual memory, like the driver's VMM API: reserve an address range
//    (cuMemAddressReserve), map and unmap physical pages inside it at the device's
//    granularity (cuMemCreate + cuMemMap / cuMemUnmap + cuMemRelease), release the range.
// Only physical memory counts as reserved: segments plus mapped pages. A call that
// would pass the capacity fails like a failed cudaMalloc (nullopt / false), and the
// policy decides what to do, exactly as a real allocator must.
//
// SimDevice (sim/sim_device.h) implements it with synthetic addresses; CudaDevice
// (cuda/) with real GPU memory. Policies never know which one they run on.
// Adaptors (sim/tracking_device.h) wrap a device to observe it, RMM-style.
#pragma once

#include <cstdint>
#include <optional>

#include "traces/trace.h"

namespace fraglab {

class Device {
 public:
  virtual ~Device() = default;

  // cudaMalloc: a contiguous segment of `size` bytes, or nullopt when out of memory.
  virtual std::optional<Addr> allocate_segment(uint64_t size, StreamIndex stream) = 0;
  virtual void free_segment(Addr addr, uint64_t size) = 0;

  // Page size for map/unmap (cuMemGetAllocationGranularity); 2 MiB by default.
  virtual uint64_t granularity() const = 0;
  // Reserves `size` bytes of address space (a multiple of the granularity). Costs no memory.
  virtual std::optional<Addr> reserve_range(uint64_t size) = 0;
  // Backs [addr, addr+size) of a reserved range with physical pages; false when out of memory.
  virtual bool map_pages(Addr addr, uint64_t size, StreamIndex stream) = 0;
  virtual void unmap_pages(Addr addr, uint64_t size) = 0;
  // Gives a reserved range back; it must have no mapped pages left.
  virtual void release_range(Addr addr, uint64_t size) = 0;
  // Maps the physical pages backing [src, src+size) (mapped earlier by map_pages; granularity-aligned)
  // a second time at [dst, dst+size) inside a reserved range. Costs no new physical memory; a page is
  // freed only when its last mapping is unmapped. false if not supported / fails.
  // (cuMemRetainAllocationHandle + cuMemMap: how GMLake stitches physical chunks into one range.)
  virtual bool alias_pages(Addr dst, Addr src, uint64_t size) = 0;

  // Physical bytes held now (segments + mapped pages, each physical page counted once).
  virtual uint64_t reserved_bytes() const = 0;
  // The most physical bytes the device will hand out; nullopt = unlimited.
  virtual std::optional<uint64_t> capacity() const = 0;
};

}  // namespace fraglab
