#include "device/call_log_device.h"

namespace fraglab {

std::optional<Addr> CallLogDevice::do_allocate_segment(uint64_t size, StreamIndex stream) {
  auto addr = upstream().allocate_segment(size, stream);
  if (addr) log(EventKind::SegmentAlloc, *addr, size);
  return addr;
}

void CallLogDevice::do_free_segment(Addr addr, uint64_t size) {
  upstream().free_segment(addr, size);
  log(EventKind::SegmentFree, addr, size);
}

bool CallLogDevice::do_map_pages(Addr addr, uint64_t size, StreamIndex stream) {
  if (!upstream().map_pages(addr, size, stream)) return false;
  log(EventKind::SegmentMap, addr, size);
  return true;
}

void CallLogDevice::do_unmap_pages(Addr addr, uint64_t size) {
  upstream().unmap_pages(addr, size);
  log(EventKind::SegmentUnmap, addr, size);
}

// The trace model has no alias event: a second mapping is logged as a map of its own, naming the
// pages it shows again.
bool CallLogDevice::do_alias_pages(Addr dst, Addr src, uint64_t size) {
  if (!upstream().alias_pages(dst, src, size)) return false;
  log(EventKind::SegmentMap, dst, size, src);
  return true;
}

}  // namespace fraglab
