#include "sim/sim_device.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace fraglab {

namespace {

[[noreturn]] void misuse(const std::string& what) {
  // A policy broke the device contract: that is a bug in the policy, not bad input.
  throw std::logic_error("device misuse: " + what);
}
}  // namespace

SimDevice::SimDevice(SimDeviceConfig config)
    : config_(config), addresses_(make_address_space(config.addresses, config.segment_alignment)) {}

bool SimDevice::fits(uint64_t size) const {
  return !config_.capacity || reserved_ + size <= *config_.capacity;
}

std::optional<Addr> SimDevice::allocate_segment(uint64_t size, StreamIndex) {
  if (size == 0) misuse("zero-byte segment");
  if (!fits(size)) return std::nullopt;
  // The address model bounds addresses at 2^48 (sim/address_space.h): past it, out of memory.
  std::optional<Addr> addr = addresses_->place_segment(size);
  if (!addr) return std::nullopt;
  segments_.emplace(*addr, size);
  reserved_ += size;
  return addr;
}

void SimDevice::free_segment(Addr addr, uint64_t size) {
  auto it = segments_.find(addr);
  if (it == segments_.end() || it->second != size) misuse("free_segment of an unknown segment");
  reserved_ -= size;
  segments_.erase(it);
  addresses_->free_segment(addr);
}

std::optional<Addr> SimDevice::reserve_range(uint64_t size) {
  if (size == 0 || size % config_.granularity) misuse("reserve_range size not a multiple of granularity");
  std::optional<Addr> addr = addresses_->place_range(size);
  if (addr) ranges_.emplace(*addr, size);
  return addr;
}

void SimDevice::check_vmm_args(Addr addr, uint64_t size, const char* call) const {
  if (size == 0 || addr % config_.granularity || size % config_.granularity)
    misuse(std::string(call) + " not aligned to granularity");
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin() || addr + size > std::prev(it)->first + std::prev(it)->second)
    misuse(std::string(call) + " outside a reserved range");
}

bool SimDevice::any_mapped(Addr addr, uint64_t size) const {
  auto it = mapped_.lower_bound(addr);
  if (it != mapped_.end() && it->first < addr + size) return true;
  return it != mapped_.begin() && std::prev(it)->first + std::prev(it)->second.size > addr;
}

void SimDevice::cut(std::map<Addr, VirtualRun>& runs, Addr at) {
  auto it = runs.upper_bound(at);
  if (it == runs.begin()) return;
  --it;
  uint64_t offset = at - it->first;
  if (offset == 0 || offset >= it->second.size) return;
  runs.emplace_hint(std::next(it), at, VirtualRun{it->second.size - offset, it->second.phys + offset});
  it->second.size = offset;
}

void SimDevice::cut(std::map<uint64_t, PhysicalRun>& runs, uint64_t at) {
  auto it = runs.upper_bound(at);
  if (it == runs.begin()) return;
  --it;
  uint64_t offset = at - it->first;
  if (offset == 0 || offset >= it->second.size) return;
  runs.emplace_hint(std::next(it), at, PhysicalRun{it->second.size - offset, it->second.mappings});
  it->second.size = offset;
}

void SimDevice::count_mappings(uint64_t phys, uint64_t size, int delta) {
  cut(physical_, phys);
  cut(physical_, phys + size);
  for (auto it = physical_.lower_bound(phys); it != physical_.end() && it->first < phys + size;) {
    it->second.mappings += delta;
    if (it->second.mappings > 0) {
      ++it;
      continue;
    }
    reserved_ -= it->second.size;  // the last mapping went: the physical memory is freed
    it = physical_.erase(it);
  }
}

bool SimDevice::map_pages(Addr addr, uint64_t size, StreamIndex) {
  check_vmm_args(addr, size, "map_pages");
  if (any_mapped(addr, size)) misuse("map_pages over pages already mapped");
  if (!fits(size)) return false;
  physical_.emplace(next_phys_, PhysicalRun{size, 1});
  mapped_.emplace(addr, VirtualRun{size, next_phys_});
  next_phys_ += size;
  reserved_ += size;
  return true;
}

bool SimDevice::alias_pages(Addr dst, Addr src, uint64_t size) {
  check_vmm_args(dst, size, "alias_pages");
  check_vmm_args(src, size, "alias_pages source");
  if (any_mapped(dst, size)) misuse("alias_pages over pages already mapped");
  cut(mapped_, src);
  cut(mapped_, src + size);
  std::vector<std::pair<Addr, VirtualRun>> pieces;
  Addr expect = src;
  for (auto it = mapped_.lower_bound(src); it != mapped_.end() && it->first < src + size; ++it) {
    if (it->first != expect) break;
    pieces.emplace_back(dst + (it->first - src), it->second);
    expect += it->second.size;
  }
  if (expect != src + size) misuse("alias_pages of pages that are not mapped");
  for (const auto& [at, run] : pieces) {
    count_mappings(run.phys, run.size, +1);
    mapped_.emplace(at, run);
  }
  return true;
}

void SimDevice::unmap_pages(Addr addr, uint64_t size) {
  cut(mapped_, addr);
  cut(mapped_, addr + size);
  Addr expect = addr;
  auto it = mapped_.lower_bound(addr);
  auto first = it;
  for (; it != mapped_.end() && it->first < addr + size && it->first == expect; ++it) expect += it->second.size;
  if (expect != addr + size) misuse("unmap_pages of pages that are not mapped");
  for (auto run = first; run != it; ++run) count_mappings(run->second.phys, run->second.size, -1);
  mapped_.erase(first, it);
}

void SimDevice::release_range(Addr addr, uint64_t size) {
  auto it = ranges_.find(addr);
  if (it == ranges_.end() || it->second != size) misuse("release_range of an unknown range");
  if (any_mapped(addr, size)) misuse("release_range with pages still mapped");
  ranges_.erase(it);
  addresses_->free_range(addr);
}

}  // namespace fraglab
