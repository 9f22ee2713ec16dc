// SimDevice: a simulated GPU. Memory is a byte count, and an optional capacity models a card's
// size or set_per_process_memory_fraction: a call that would pass it fails exactly where cudaMalloc
// would. Addresses come from an AddressSpace (sim/address_space.h): by default the CUDA driver's
// measured placement, so that address-ordered policies decide as they would on the GPU.
//
// VMM pages are modelled like the driver does: every map_pages creates physical memory
// (cuMemCreate) mapped at one virtual range; alias_pages maps the same physical pages at a
// second range (cuMemRetainAllocationHandle + cuMemMap). Physical memory is reference
// counted by mapping, so reserved bytes count each physical page once and a page is freed
// when its last mapping goes.
#pragma once

#include <map>
#include <memory>

#include "sim/address_space.h"
#include "sim/device.h"

namespace fraglab {

struct SimDeviceConfig {
  std::optional<uint64_t> capacity;    // bytes; nullopt = unlimited
  uint64_t granularity = 2ull << 20;   // VMM page size
  uint64_t segment_alignment = 2ull << 20;  // the bump model's alignment (and gap) between allocations
  AddressModel addresses = AddressModel::Cuda;
};

class SimDevice final : public Device {
 public:
  explicit SimDevice(SimDeviceConfig config = {});

  std::optional<Addr> allocate_segment(uint64_t size, StreamIndex stream) override;
  void free_segment(Addr addr, uint64_t size) override;
  uint64_t granularity() const override { return config_.granularity; }
  std::optional<Addr> reserve_range(uint64_t size) override;
  bool map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void unmap_pages(Addr addr, uint64_t size) override;
  void release_range(Addr addr, uint64_t size) override;
  bool alias_pages(Addr dst, Addr src, uint64_t size) override;
  uint64_t reserved_bytes() const override { return reserved_; }
  std::optional<uint64_t> capacity() const override { return config_.capacity; }

 private:
  // A mapped stretch of virtual pages and the physical bytes behind it.
  struct VirtualRun {
    uint64_t size;
    uint64_t phys;  // start in the physical "address space" (a counter, not a device address)
  };
  // A stretch of physical memory and how many virtual mappings point at it.
  struct PhysicalRun {
    uint64_t size;
    uint32_t mappings;
  };

  bool fits(uint64_t size) const;
  void check_vmm_args(Addr addr, uint64_t size, const char* call) const;
  bool any_mapped(Addr addr, uint64_t size) const;
  // Makes `at` a run boundary (splitting the run that contains it), in either map.
  static void cut(std::map<Addr, VirtualRun>& runs, Addr at);
  static void cut(std::map<uint64_t, PhysicalRun>& runs, uint64_t at);
  // Adds `delta` (+1 or -1) to the mapping count of [phys, phys+size); frees what drops to 0.
  void count_mappings(uint64_t phys, uint64_t size, int delta);

  SimDeviceConfig config_;
  uint64_t reserved_ = 0;
  std::unique_ptr<AddressSpace> addresses_;
  std::map<Addr, uint64_t> segments_;  // live cudaMalloc'd segments
  std::map<Addr, uint64_t> ranges_;    // reserved VMM ranges
  std::map<Addr, VirtualRun> mapped_;  // mapped virtual pages, address-ordered
  std::map<uint64_t, PhysicalRun> physical_;
  uint64_t next_phys_ = 0;
};

}  // namespace fraglab
