// ForwardingDevice: the base of every adaptor, forwarding each call to the device below unchanged.
//
// RMM's adaptors each restate the whole interface; here an adaptor derives from this and overrides
// only the calls it observes or changes (StatisticsDevice counts, LimitingDevice refuses, CallLogDevice
// logs, PhysicalMapDevice keeps a map, HintedDevice places), so what an adaptor does is what it lists.
// Forwarding goes through the upstream's public calls, which check their arguments again: a layer never
// trusts that the one above it did.
#pragma once

#include "device/device.h"

namespace fraglab {

class ForwardingDevice : public Device {
 protected:
  explicit ForwardingDevice(Device& upstream) : upstream_(upstream), granularity_(upstream.granularity()) {}

  Device& upstream() const { return upstream_; }

  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override {
    return upstream_.allocate_segment(size, stream);
  }
  void do_free_segment(Addr addr, uint64_t size) override { upstream_.free_segment(addr, size); }
  uint64_t do_granularity() const override { return granularity_; }
  std::optional<Addr> do_reserve_range(uint64_t size) override { return upstream_.reserve_range(size); }
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override {
    return upstream_.map_pages(addr, size, stream);
  }
  void do_unmap_pages(Addr addr, uint64_t size) override { upstream_.unmap_pages(addr, size); }
  void do_release_range(Addr addr, uint64_t size) override { upstream_.release_range(addr, size); }
  bool do_alias_pages(Addr dst, Addr src, uint64_t size) override { return upstream_.alias_pages(dst, src, size); }
  uint64_t do_reserved_bytes() const override { return upstream_.reserved_bytes(); }
  std::optional<uint64_t> do_capacity() const override { return upstream_.capacity(); }

 private:
  Device& upstream_;
  // The upstream's, which a device fixes when it is built: every layer's public calls check
  // alignment against it, and asking down the stack each time cost a virtual call per layer.
  uint64_t granularity_;
};

}  // namespace fraglab
