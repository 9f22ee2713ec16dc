// SimDevice: a simulated GPU of unlimited memory; a card's size or set_per_process_memory_fraction is
// a LimitingDevice over it (device/simulated_gpu.h builds the pair from a SimDeviceConfig). Addresses come from an
// AddressSpace (device/address_space.h): by default the CUDA driver's measured placement, so that address-ordered
// policies decide as they would on the GPU.
//
// VMM pages are modelled like the driver does: every map_pages creates physical memory
// (cuMemCreate) mapped at one virtual range; alias_pages maps the same physical pages at a
// second range (cuMemRetainAllocationHandle + cuMemMap). Physical memory is reference
// counted by mapping, so reserved bytes count each physical page once and a page is freed
// when its last mapping goes.
//
// Mapped runs are kept per reserved range and reference counts per physical allocation:
// every VMM call acts inside one range (unmap_pages may cross into an adjacent one), and a
// range or an allocation holds a few runs, so a call costs one search of the ranges and short
// scans of small vectors, not a dozen searches of device-wide ordered maps.
#pragma once

#include <memory>
#include <vector>

#include "device/address_space.h"
#include "device/address_table.h"
#include "device/placing_device.h"
#include "device/tiered_map.h"
#include "traces/free_slots.h"

namespace fraglab {

struct SimDeviceConfig {
  std::optional<uint64_t> capacity;         // bytes; nullopt = unlimited (enforced by a LimitingDevice)
  uint64_t granularity = 2ull << 20;        // VMM page size
  uint64_t segment_alignment = 2ull << 20;  // the bump model's alignment (and gap) between allocations
  AddressModel addresses = AddressModel::Cuda;
};

// The SimDevice a HintedDevice's fallback should be: unlimited, and with the bump model whatever
// the config's, so that segments and ranges the recording did not place keep addresses far from the
// recorded ones (the driver's model would start where the recording's own driver started).
SimDeviceConfig hinted_upstream_config(SimDeviceConfig config);

class SimDevice final : public PlacingDevice {
 public:
  // `config.capacity` must be unset: capacity is a LimitingDevice's (throws std::logic_error).
  explicit SimDevice(SimDeviceConfig config = {});

 private:
  // The Device interface (device/device.h); its public calls check the arguments first.
  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override;
  void do_free_segment(Addr addr, uint64_t size) override;
  uint64_t do_granularity() const override { return config_.granularity; }
  std::optional<Addr> do_reserve_range(uint64_t size) override;
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void do_unmap_pages(Addr addr, uint64_t size) override;
  void do_release_range(Addr addr, uint64_t size) override;
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override;
  uint64_t do_reserved_bytes() const override { return reserved_; }
  std::optional<uint64_t> do_capacity() const override { return std::nullopt; }
  // PlacingDevice: the address model takes the place when it is free.
  bool do_allocate_segment_at(Addr addr, uint64_t size, StreamIndex stream) override;
  bool do_reserve_range_at(Addr addr, uint64_t size) override;

  // A mapped stretch of virtual pages and the physical bytes behind it: `offset` bytes into
  // physical allocation `alloc`.
  struct VirtualRun {
    Addr addr;
    uint64_t size;
    uint32_t alloc;
    uint64_t offset;
  };
  // A reserved range and its mapped runs, address-ordered.
  struct Range {
    uint64_t size;
    std::vector<VirtualRun> runs;
  };
  // A stretch of one physical allocation and how many virtual mappings point at it.
  struct PhysicalRun {
    uint64_t offset;
    uint64_t size;
    uint32_t mappings;
  };
  // What one map_pages created (cuMemCreate): its pieces still mapped, offset-ordered.
  struct PhysicalAlloc {
    std::vector<PhysicalRun> runs;
  };
  using RangeIt = TieredMap<Addr, Range>::iterator;

  // The reserved range [addr, addr+size) lies in (throws device misuse when none).
  RangeIt range_of(Addr addr, uint64_t size, const char* call);
  static bool any_mapped(const Range& range, Addr addr, uint64_t size);
  // Makes `at` a run boundary (splitting the run that contains it); returns the index of the
  // first run at or after `at`.
  static size_t cut(std::vector<VirtualRun>& runs, Addr at);
  static size_t cut(std::vector<PhysicalRun>& runs, uint64_t at);
  static void insert_run(Range& range, const VirtualRun& run);
  // Adds `delta` (+1 or -1) to the mapping count of [offset, offset+size) of an allocation;
  // frees what drops to 0.
  void count_mappings(uint32_t alloc, uint64_t offset, uint64_t size, int delta);

  SimDeviceConfig config_;
  uint64_t reserved_ = 0;
  std::unique_ptr<AddressSpace> addresses_;
  AddressTable<uint64_t> segments_;  // live cudaMalloc'd segments: address -> size
  TieredMap<Addr, Range> ranges_;    // reserved VMM ranges
  std::vector<PhysicalAlloc> physical_;
  FreeSlots unused_allocs_;  // slots of physical_ whose every page was freed
};

}  // namespace fraglab
