// PlacingDevice: a device that can also put memory at a given address.
//
// cudaMalloc chooses the address; cuMemAddressReserve takes one as a request. A simulated device
// can honour either: HintedDevice (device/hinted_device.h) replays a recording by asking its
// upstream for the recorded addresses, and needs no more of it than this capability. The memory
// placed is the device's like any other (freed, mapped, counted and limited the same way); a place
// that is taken, or that the device cannot give, is refused (false) and nothing happens.
#pragma once

#include "device/device.h"

namespace fraglab {

class PlacingDevice : public Device {
 public:
  // allocate_segment at `addr`: a contiguous segment of `size` (> 0) bytes there.
  bool allocate_segment_at(Addr addr, uint64_t size, StreamIndex stream) {
    if (size == 0) misuse("zero-byte segment");
    return do_allocate_segment_at(addr, size, stream);
  }
  // reserve_range at `addr`: both granularity-aligned.
  bool reserve_range_at(Addr addr, uint64_t size) {
    if (size == 0 || !aligned(size) || !aligned(addr))
      misuse("reserve_range_at address or size not a multiple of granularity");
    return do_reserve_range_at(addr, size);
  }

 private:
  virtual bool do_allocate_segment_at(Addr addr, uint64_t size, StreamIndex stream) = 0;
  virtual bool do_reserve_range_at(Addr addr, uint64_t size) = 0;
};

}  // namespace fraglab
