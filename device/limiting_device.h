// LimitingDevice: an adaptor that refuses to hold more than a limit of physical memory.
//
// The one place capacity is enforced (RMM's limiting_resource_adaptor): a simulated card's size or
// set_per_process_memory_fraction over a SimDevice or HintedDevice, and the GUI's "would this request
// fit in what the policy holds now?" cap, set while the replay runs. A call that would pass the limit
// fails like an out-of-memory cudaMalloc (nullopt / false) before it reaches the device, so the
// policy runs its own recovery (PyTorch frees its cache and retries) as it would on a full GPU.
#pragma once

#include <optional>

#include "device/device.h"

namespace fraglab {

class LimitingDevice final : public Device {
 public:
  // `limit`: bytes; nullopt = the upstream's own capacity (unlimited for a SimDevice).
  explicit LimitingDevice(Device& upstream, std::optional<uint64_t> limit = std::nullopt)
      : upstream_(upstream), granularity_(upstream.granularity()), limit_(limit) {}

  void set_limit(std::optional<uint64_t> limit) { limit_ = limit; }
  // Stops refusing at the limit, which stays the capacity reported: for a policy that keeps itself within
  // it as the allocator it models does (Policy::enforces_capacity: PyTorch under a memory fraction checks
  // each new segment against the fraction, and an expandable segment then maps whole pages past it).
  void set_enforcing(bool enforcing) { enforcing_ = enforcing; }

 private:
  bool fits(uint64_t size) const { return !enforcing_ || !limit_ || upstream_.reserved_bytes() + size <= *limit_; }

  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override {
    if (!fits(size)) return std::nullopt;
    return upstream_.allocate_segment(size, stream);
  }
  void do_free_segment(Addr addr, uint64_t size) override { upstream_.free_segment(addr, size); }
  uint64_t do_granularity() const override { return granularity_; }
  std::optional<Addr> do_reserve_range(uint64_t size) override { return upstream_.reserve_range(size); }
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override {
    return fits(size) && upstream_.map_pages(addr, size, stream);
  }
  // A second mapping of pages already held costs no physical memory.
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override { return upstream_.alias_pages(dst, src, size); }
  void do_unmap_pages(Addr addr, uint64_t size) override { upstream_.unmap_pages(addr, size); }
  void do_release_range(Addr addr, uint64_t size) override { upstream_.release_range(addr, size); }
  uint64_t do_reserved_bytes() const override { return upstream_.reserved_bytes(); }
  std::optional<uint64_t> do_capacity() const override { return limit_ ? limit_ : upstream_.capacity(); }

  Device& upstream_;
  // The upstream's, which a device fixes when it is built: every layer's public calls check
  // alignment against it, and asking down the stack each time cost a virtual call per layer.
  uint64_t granularity_;
  std::optional<uint64_t> limit_;
  bool enforcing_ = true;
};

}  // namespace fraglab
