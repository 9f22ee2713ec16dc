// CudaDevice: the device interface (device/device.h) on a real GPU.
//
// Segments are cudaMalloc/cudaFree. Virtual memory is the driver's VMM API, the one
// PyTorch's expandable segments use (c10/cuda/CUDACachingAllocator.cpp, ExpandableSegment):
// cuMemAddressReserve for a range, and per page of cuMemGetAllocationGranularity bytes
// a cuMemCreate'd physical allocation mapped with cuMemMap and opened with
// cuMemSetAccess. One physical allocation per page because cuMemUnmap can only unmap
// whole mappings, and a policy may unmap any page-aligned part of what it mapped.
// alias_pages maps existing pages a second time (cuMemRetainAllocationHandle + cuMemMap):
// a physical page is freed when its last mapping goes.
//
// Out of memory (a real one, or past the configured capacity) is reported to the policy
// as nullopt / false, like SimDevice; other CUDA failures throw CudaError.
//
// Beside its own count of physical bytes the device keeps the driver's view: free device
// memory (cudaMemGetInfo) sampled after every call that changes memory, as a delta from
// the value when the device was made. Both are reported so they can be compared.
#pragma once

#include <cuda.h>

#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "device/device.h"

namespace fraglab::cuda {

struct CudaDeviceConfig {
  int ordinal = 0;
  std::optional<uint64_t> capacity;  // bytes the device hands out at most; nullopt = what the GPU has
};

// What the driver says about the GPU's memory (cudaMemGetInfo), relative to the moment
// the device was made (or reset_driver_baseline was called).
struct DriverMemory {
  uint64_t total = 0;          // the GPU's memory
  uint64_t free_at_start = 0;  // free bytes at the baseline
  uint64_t free_now = 0;       // free bytes at the last sample
  uint64_t used_now = 0;       // free_at_start - free_now (0 if more is free than at the start)
  uint64_t used_peak = 0;      // the largest used_now sampled
  uint64_t samples = 0;
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(CudaDeviceConfig config = {});  // throws CudaError (no GPU, bad ordinal)
  ~CudaDevice() override;                             // releases whatever is still held
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

 private:
  // The Device interface (device/device.h); its public calls check the arguments first.
  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override;
  void do_free_segment(Addr addr, uint64_t size) override;
  uint64_t do_granularity() const override { return granularity_; }
  std::optional<Addr> do_reserve_range(uint64_t size) override;
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void do_unmap_pages(Addr addr, uint64_t size) override;
  void do_release_range(Addr addr, uint64_t size) override;
  // Maps the physical pages backing [src, src+size) a second time at [dst, dst+size).
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override;
  uint64_t do_reserved_bytes() const override { return reserved_; }
  std::optional<uint64_t> do_capacity() const override { return config_.capacity; }

 public:
  int ordinal() const { return config_.ordinal; }
  const std::string& name() const { return name_; }
  // Samples cudaMemGetInfo now (the device also does so after each call that changes memory).
  const DriverMemory& sample_driver();
  const DriverMemory& driver() const { return driver_; }
  // Starts the driver's view afresh: free memory now becomes the zero point.
  void reset_driver_baseline();

  // Frees every segment, unmaps every page and releases every range still held. Returns
  // the physical bytes that were still held (a policy that did not give everything back).
  uint64_t release_everything();
  uint64_t segment_count() const { return segments_.size(); }
  uint64_t mapped_page_count() const { return pages_.size(); }
  uint64_t range_count() const { return ranges_.size(); }

  // True when a CUDA device can be used here; otherwise `why` says what is missing.
  static bool available(std::string* why = nullptr);

 private:
  bool fits(uint64_t size) const { return !config_.capacity || reserved_ + size <= *config_.capacity; }
  // Device misuse unless [addr, addr+size) lies inside one reserved range (alignment: Device checks it).
  void check_in_range(Addr addr, uint64_t size, const char* call) const;
  bool map_one_page(Addr page);
  void map_existing(Addr dst, uint64_t physical);
  void unmap_one_page(Addr page);
  void set_access(Addr addr, uint64_t size);

  CudaDeviceConfig config_;
  std::string name_;
  CUmemAllocationProp prop_{};
  uint64_t granularity_ = 0;
  uint64_t reserved_ = 0;
  DriverMemory driver_;

  std::map<Addr, uint64_t> segments_;  // cudaMalloc'd: address -> size
  std::map<Addr, uint64_t> ranges_;    // reserved address ranges: start -> size
  // Mapped virtual pages -> the physical page behind them (an id of ours), and how many
  // mappings each physical page has: it is freed with its last.
  std::map<Addr, uint64_t> pages_;
  std::unordered_map<uint64_t, uint32_t> physical_mappings_;
  uint64_t next_physical_id_ = 0;
};

}  // namespace fraglab::cuda
