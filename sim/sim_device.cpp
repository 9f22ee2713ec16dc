#include "sim/sim_device.h"

#include <stdexcept>
#include <string>

namespace fraglab {

namespace {
uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

[[noreturn]] void misuse(const std::string& what) {
  // A policy broke the device contract: that is a bug in the policy, not bad input.
  throw std::logic_error("device misuse: " + what);
}
}  // namespace

SimDevice::SimDevice(SimDeviceConfig config) : config_(config) {}

bool SimDevice::fits(uint64_t size) const {
  return !config_.capacity || reserved_ + size <= *config_.capacity;
}

Addr SimDevice::take_address_space(uint64_t size) {
  Addr addr = next_address_;
  // Leave a gap between allocations so that adjacent segments never look contiguous.
  next_address_ = round_up(addr + size, config_.segment_alignment) + config_.segment_alignment;
  return addr;
}

std::optional<Addr> SimDevice::allocate_segment(uint64_t size, StreamIndex) {
  if (size == 0) misuse("zero-byte segment");
  if (!fits(size)) return std::nullopt;
  Addr addr = take_address_space(size);
  segments_.emplace(addr, size);
  reserved_ += size;
  return addr;
}

void SimDevice::free_segment(Addr addr, uint64_t size) {
  auto it = segments_.find(addr);
  if (it == segments_.end() || it->second != size) misuse("free_segment of an unknown segment");
  reserved_ -= size;
  segments_.erase(it);
}

std::optional<Addr> SimDevice::reserve_range(uint64_t size) {
  if (size == 0 || size % config_.granularity) misuse("reserve_range size not a multiple of granularity");
  Addr addr = take_address_space(size);
  ranges_.emplace(addr, size);
  return addr;
}

bool SimDevice::map_pages(Addr addr, uint64_t size, StreamIndex) {
  if (size == 0 || addr % config_.granularity || size % config_.granularity)
    misuse("map_pages not aligned to granularity");
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin() || addr + size > std::prev(it)->first + std::prev(it)->second)
    misuse("map_pages outside a reserved range");
  if (!fits(size)) return false;
  reserved_ += size;
  return true;
}

void SimDevice::unmap_pages(Addr addr, uint64_t size) {
  if (size > reserved_) misuse("unmap_pages of more than is mapped");
  (void)addr;
  reserved_ -= size;
}

void SimDevice::release_range(Addr addr, uint64_t size) {
  auto it = ranges_.find(addr);
  if (it == ranges_.end() || it->second != size) misuse("release_range of an unknown range");
  ranges_.erase(it);
}

}  // namespace fraglab
