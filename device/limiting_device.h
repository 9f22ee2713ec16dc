// LimitingDevice: an adaptor that refuses to hold more than a limit of physical memory.
//
// The one place capacity is enforced (RMM's limiting_resource_adaptor): a simulated card's size or
// set_per_process_memory_fraction over a SimDevice or HintedDevice, and the GUI's "would this request
// fit in what the policy holds now?" cap, set while the replay runs. A call that would pass the limit
// fails like an out-of-memory cudaMalloc (nullopt / false) before it reaches the device, so the
// policy runs its own recovery (PyTorch frees its cache and retries) as it would on a full GPU.
#pragma once

#include <optional>

#include "device/forwarding_device.h"

namespace fraglab {

class LimitingDevice final : public ForwardingDevice {
 public:
  // `limit`: bytes; nullopt = the upstream's own capacity (unlimited for a SimDevice).
  explicit LimitingDevice(Device& upstream, std::optional<uint64_t> limit = std::nullopt)
      : ForwardingDevice(upstream), limit_(limit) {}

  void set_limit(std::optional<uint64_t> limit) { limit_ = limit; }
  // Stops refusing at the limit, which stays the capacity reported: for a policy that keeps itself within
  // it as the allocator it models does (Policy::enforces_capacity: PyTorch under a memory fraction checks
  // each new segment against the fraction, and an expandable segment then maps whole pages past it).
  void set_enforcing(bool enforcing) { enforcing_ = enforcing; }

 private:
  bool fits(uint64_t size) const { return !enforcing_ || !limit_ || upstream().reserved_bytes() + size <= *limit_; }

  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override {
    if (!fits(size)) return std::nullopt;
    return ForwardingDevice::do_allocate_segment(size, stream);
  }
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override {
    return fits(size) && ForwardingDevice::do_map_pages(addr, size, stream);
  }
  // (alias_pages is forwarded as it is: a second mapping of pages already held costs no physical memory.)
  std::optional<uint64_t> do_capacity() const override { return limit_ ? limit_ : upstream().capacity(); }

  std::optional<uint64_t> limit_;
  bool enforcing_ = true;
};

}  // namespace fraglab
