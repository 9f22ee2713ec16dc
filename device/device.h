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
// SimDevice (device/sim_device.h) implements it with synthetic addresses; CudaDevice
// (cuda/) with real GPU memory. Policies never know which one they run on.
// Adaptors wrap any device to add one job each, RMM-style: LimitingDevice (device/limiting_device.h)
// a capacity, StatisticsDevice call counts and the reserved peak, PhysicalMapDevice where memory is,
// CallLogDevice the ordered call log (fidelity, export), HintedDevice (device/hinted_device.h) a
// recording's addresses over any PlacingDevice (device/placing_device.h: one that can also place at
// an address). TrackingDevice (device/tracking_device.h) composes the two the replay engine watches.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "traces/trace.h"

namespace fraglab {

// RMM's shape (device_memory_resource): each public call is non-virtual and checks what can be
// checked without knowing the device's state (sizes, alignment to the granularity), once for every
// device and adaptor; then it calls the private virtual do_* that a device or adaptor implements.
// A misuse is a bug in the policy, not an outcome: it throws std::logic_error("device misuse: ...").
class Device {
 public:
  virtual ~Device() = default;

  // cudaMalloc: a contiguous segment of `size` (> 0) bytes, or nullopt when out of memory.
  std::optional<Addr> allocate_segment(uint64_t size, StreamIndex stream) {
    if (size == 0) misuse("zero-byte segment");
    return do_allocate_segment(size, stream);
  }
  void free_segment(Addr addr, uint64_t size) { do_free_segment(addr, size); }

  // Page size for map/unmap (cuMemGetAllocationGranularity); 2 MiB by default.
  uint64_t granularity() const { return do_granularity(); }
  // Reserves `size` bytes of address space (a multiple of the granularity). Costs no memory.
  std::optional<Addr> reserve_range(uint64_t size) {
    if (size == 0 || !aligned(size)) misuse("reserve_range size not a multiple of granularity");
    return do_reserve_range(size);
  }
  // Backs [addr, addr+size) of a reserved range with physical pages; false when out of memory.
  bool map_pages(Addr addr, uint64_t size, StreamIndex stream) {
    check_pages(addr, size, "map_pages");
    return do_map_pages(addr, size, stream);
  }
  void unmap_pages(Addr addr, uint64_t size) {
    check_pages(addr, size, "unmap_pages");
    do_unmap_pages(addr, size);
  }
  // Gives a reserved range back; it must have no mapped pages left.
  void release_range(Addr addr, uint64_t size) { do_release_range(addr, size); }
  // Maps the physical pages backing [src, src+size) (mapped earlier by map_pages; granularity-aligned)
  // a second time at [dst, dst+size) inside a reserved range. Costs no new physical memory; a page is
  // freed only when its last mapping is unmapped. false if not supported / fails.
  // (cuMemRetainAllocationHandle + cuMemMap: how GMLake stitches physical chunks into one range.)
  bool alias_pages(Addr dst, Addr src, uint64_t size) {
    check_pages(dst, size, "alias_pages");
    if (!aligned(src)) misuse("alias_pages source not aligned to granularity");
    return do_alias_pages(dst, src, size);
  }

  // Physical bytes held now (segments + mapped pages, each physical page counted once).
  uint64_t reserved_bytes() const { return do_reserved_bytes(); }
  // The most physical bytes the device will hand out; nullopt = unlimited.
  std::optional<uint64_t> capacity() const { return do_capacity(); }

 protected:
  [[noreturn]] static void misuse(const std::string& what) { throw std::logic_error("device misuse: " + what); }
  // Whether `n` is a multiple of the granularity. Every layer of a stack checks every VMM call, and
  // a 64-bit division costs tens of cycles: a mask when the granularity is a power of two (the
  // driver's always are; a SimDeviceConfig may set any other). Not std::has_single_bit: without
  // -mpopcnt it is a library call.
  bool aligned(uint64_t n) const { return multiple_of(n, granularity()); }
  static bool multiple_of(uint64_t n, uint64_t g) {
    return g != 0 && (g & (g - 1)) == 0 ? (n & (g - 1)) == 0 : n % g == 0;
  }

 private:
  void check_pages(Addr addr, uint64_t size, const char* call) const {
    const uint64_t g = granularity();
    if (size == 0 || !multiple_of(addr, g) || !multiple_of(size, g))
      misuse(std::string(call) + " not aligned to granularity");
  }

  virtual std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) = 0;
  virtual void do_free_segment(Addr addr, uint64_t size) = 0;
  virtual uint64_t do_granularity() const = 0;
  virtual std::optional<Addr> do_reserve_range(uint64_t size) = 0;
  virtual bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) = 0;
  virtual void do_unmap_pages(Addr addr, uint64_t size) = 0;
  virtual void do_release_range(Addr addr, uint64_t size) = 0;
  virtual bool do_alias_pages(Addr dst, Addr src, uint64_t size) = 0;
  virtual uint64_t do_reserved_bytes() const = 0;
  virtual std::optional<uint64_t> do_capacity() const = 0;
};

}  // namespace fraglab
