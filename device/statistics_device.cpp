#include "device/statistics_device.h"

#include <algorithm>

namespace fraglab {

void StatisticsDevice::grew(uint64_t size) {
  reserved_ += size;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
}

std::optional<Addr> StatisticsDevice::do_allocate_segment(uint64_t size, StreamIndex stream) {
  auto addr = upstream().allocate_segment(size, stream);
  if (!addr) {
    ++counts_.failed;
    return addr;
  }
  ++counts_.segment_allocs;
  grew(size);
  return addr;
}

void StatisticsDevice::do_free_segment(Addr addr, uint64_t size) {
  upstream().free_segment(addr, size);
  ++counts_.segment_frees;
  reserved_ -= size;
}

std::optional<Addr> StatisticsDevice::do_reserve_range(uint64_t size) {
  auto addr = upstream().reserve_range(size);
  ++(addr ? counts_.reserves : counts_.failed);
  return addr;
}

bool StatisticsDevice::do_map_pages(Addr addr, uint64_t size, StreamIndex stream) {
  if (!upstream().map_pages(addr, size, stream)) {
    ++counts_.failed;
    return false;
  }
  ++counts_.maps;
  grew(size);
  return true;
}

void StatisticsDevice::do_unmap_pages(Addr addr, uint64_t size) {
  // Physical pages go only with their last mapping (alias_pages maps some twice): the upstream
  // device knows how many bytes this unmap freed.
  uint64_t before = upstream().reserved_bytes();
  upstream().unmap_pages(addr, size);
  ++counts_.unmaps;
  uint64_t freed = before - upstream().reserved_bytes();
  reserved_ -= std::min(freed, reserved_);
}

void StatisticsDevice::do_release_range(Addr addr, uint64_t size) {
  upstream().release_range(addr, size);
  ++counts_.releases;
}

bool StatisticsDevice::do_alias_pages(Addr dst, Addr src, uint64_t size) {
  if (!upstream().alias_pages(dst, src, size)) {
    ++counts_.failed;
    return false;
  }
  ++counts_.aliases;
  return true;
}

}  // namespace fraglab
