// CappedDevice: a device adaptor that refuses to grow past a cap set at run time.
//
// The GUI uses it to ask a policy "would this request be served with the memory you hold
// now?": replay to the cursor uncapped, then cap at the reserved bytes of that moment and
// try the request. Growth fails exactly like an out-of-memory cudaMalloc, so the policy
// runs its own recovery (PyTorch frees its cache and retries) as it would on a full GPU.
#pragma once

#include <optional>

#include "sim/device.h"

namespace fraglab::gui {

class CappedDevice final : public Device {
 public:
  explicit CappedDevice(Device& upstream) : upstream_(upstream) {}

  void set_cap(std::optional<uint64_t> cap) { cap_ = cap; }

  std::optional<Addr> allocate_segment(uint64_t size, StreamIndex stream) override {
    if (!fits(size)) return std::nullopt;
    return upstream_.allocate_segment(size, stream);
  }
  void free_segment(Addr addr, uint64_t size) override { upstream_.free_segment(addr, size); }
  uint64_t granularity() const override { return upstream_.granularity(); }
  std::optional<Addr> reserve_range(uint64_t size) override { return upstream_.reserve_range(size); }
  bool map_pages(Addr addr, uint64_t size, StreamIndex stream) override {
    return fits(size) && upstream_.map_pages(addr, size, stream);
  }
  bool alias_pages(Addr dst, Addr src, uint64_t size) override { return upstream_.alias_pages(dst, src, size); }
  void unmap_pages(Addr addr, uint64_t size) override { upstream_.unmap_pages(addr, size); }
  void release_range(Addr addr, uint64_t size) override { upstream_.release_range(addr, size); }
  uint64_t reserved_bytes() const override { return upstream_.reserved_bytes(); }
  std::optional<uint64_t> capacity() const override { return cap_ ? cap_ : upstream_.capacity(); }

 private:
  bool fits(uint64_t size) const { return !cap_ || upstream_.reserved_bytes() + size <= *cap_; }

  Device& upstream_;
  std::optional<uint64_t> cap_;
};

}  // namespace fraglab::gui
