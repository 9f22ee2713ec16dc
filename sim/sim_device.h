// SimDevice: a simulated GPU. Addresses are synthetic, memory is a byte count, and an
// optional capacity models a card's size or set_per_process_memory_fraction: a call that
// would pass it fails exactly where cudaMalloc would.
#pragma once

#include <map>

#include "sim/device.h"

namespace fraglab {

struct SimDeviceConfig {
  std::optional<uint64_t> capacity;    // bytes; nullopt = unlimited
  uint64_t granularity = 2ull << 20;   // VMM page size
  uint64_t segment_alignment = 2ull << 20;  // cudaMalloc returns 2 MiB-aligned (at least 512 B) memory
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
  uint64_t reserved_bytes() const override { return reserved_; }
  std::optional<uint64_t> capacity() const override { return config_.capacity; }

 private:
  bool fits(uint64_t size) const;
  Addr take_address_space(uint64_t size);

  SimDeviceConfig config_;
  uint64_t reserved_ = 0;
  // Address space is handed out bump-style: addresses are never reused, which keeps
  // block maps readable and makes stale-address bugs in policies visible.
  Addr next_address_ = 1ull << 32;
  std::map<Addr, uint64_t> segments_;  // live cudaMalloc'd segments
  std::map<Addr, uint64_t> ranges_;    // reserved VMM ranges
};

}  // namespace fraglab
