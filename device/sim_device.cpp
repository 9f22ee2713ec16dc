#include "device/sim_device.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fraglab {

SimDevice::SimDevice(SimDeviceConfig config)
    : config_(config), addresses_(make_address_space(config.addresses, config.segment_alignment)) {
  // Capacity is one adaptor's job (device/limiting_device.h): a SimDevice that silently ignored one
  // would be an unlimited card where a limited one was asked for.
  if (config.capacity) throw std::logic_error("SimDevice has no capacity: wrap it in a LimitingDevice (SimulatedGpu)");
}

SimDeviceConfig hinted_upstream_config(SimDeviceConfig config) {
  config.capacity.reset();
  config.addresses = AddressModel::Bump;
  return config;
}

std::optional<Addr> SimDevice::do_allocate_segment(uint64_t size, StreamIndex) {
  // The address model bounds addresses at 2^48 (device/address_space.h): past it, out of memory.
  std::optional<Addr> addr = addresses_->place_segment(size);
  if (!addr) return std::nullopt;
  segments_.emplace(*addr, size);
  reserved_ += size;
  return addr;
}

void SimDevice::do_free_segment(Addr addr, uint64_t size) {
  const uint64_t* held = segments_.find(addr);
  if (!held || *held != size) misuse("free_segment of an unknown segment");
  reserved_ -= size;
  segments_.erase(addr);
  addresses_->free_segment(addr);
}

std::optional<Addr> SimDevice::do_reserve_range(uint64_t size) {
  std::optional<Addr> addr = addresses_->place_range(size);
  if (addr) ranges_.emplace(*addr, Range{size, {}});
  return addr;
}

bool SimDevice::do_allocate_segment_at(Addr addr, uint64_t size, StreamIndex) {
  if (!addresses_->place_segment_at(addr, size)) return false;
  segments_.emplace(addr, size);
  reserved_ += size;
  return true;
}

bool SimDevice::do_reserve_range_at(Addr addr, uint64_t size) {
  if (!addresses_->place_range_at(addr, size)) return false;
  ranges_.emplace(addr, Range{size, {}});
  return true;
}

SimDevice::RangeIt SimDevice::range_of(Addr addr, uint64_t size, const char* call) {
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin() || addr + size > std::prev(it)->first + std::prev(it)->second.size)
    misuse(std::string(call) + " outside a reserved range");
  return std::prev(it);
}

bool SimDevice::any_mapped(const Range& range, Addr addr, uint64_t size) {
  auto it = std::partition_point(range.runs.begin(), range.runs.end(),
                                 [&](const VirtualRun& r) { return r.addr + r.size <= addr; });
  return it != range.runs.end() && it->addr < addr + size;
}

size_t SimDevice::cut(std::vector<VirtualRun>& runs, Addr at) {
  auto it = std::partition_point(runs.begin(), runs.end(), [&](const VirtualRun& r) { return r.addr + r.size <= at; });
  auto i = static_cast<size_t>(it - runs.begin());
  if (it == runs.end() || it->addr >= at) return i;
  uint64_t offset = at - it->addr;
  VirtualRun rest{at, it->size - offset, it->alloc, it->offset + offset};
  it->size = offset;
  runs.insert(it + 1, rest);
  return i + 1;
}

size_t SimDevice::cut(std::vector<PhysicalRun>& runs, uint64_t at) {
  auto it =
      std::partition_point(runs.begin(), runs.end(), [&](const PhysicalRun& r) { return r.offset + r.size <= at; });
  auto i = static_cast<size_t>(it - runs.begin());
  if (it == runs.end() || it->offset >= at) return i;
  uint64_t offset = at - it->offset;
  PhysicalRun rest{at, it->size - offset, it->mappings};
  it->size = offset;
  runs.insert(it + 1, rest);
  return i + 1;
}

void SimDevice::insert_run(Range& range, const VirtualRun& run) {
  auto at = std::partition_point(range.runs.begin(), range.runs.end(),
                                 [&](const VirtualRun& r) { return r.addr < run.addr; });
  range.runs.insert(at, run);
}

void SimDevice::count_mappings(uint32_t alloc, uint64_t offset, uint64_t size, int delta) {
  std::vector<PhysicalRun>& runs = physical_[alloc].runs;
  size_t from = cut(runs, offset), to = cut(runs, offset + size), kept = from;
  for (size_t i = from; i < to; ++i) {
    runs[i].mappings += delta;
    if (runs[i].mappings > 0)
      runs[kept++] = runs[i];
    else
      reserved_ -= runs[i].size;  // the last mapping went: the physical memory is freed
  }
  runs.erase(runs.begin() + static_cast<ptrdiff_t>(kept), runs.begin() + static_cast<ptrdiff_t>(to));
  if (runs.empty()) unused_allocs_.give_back(alloc);  // its slot (and the vector's capacity) is reused
}

bool SimDevice::do_map_pages(Addr addr, uint64_t size, StreamIndex) {
  RangeIt range = range_of(addr, size, "map_pages");
  if (any_mapped(range->second, addr, size)) misuse("map_pages over pages already mapped");
  uint32_t alloc = unused_allocs_.take(physical_);
  physical_[alloc].runs.assign(1, PhysicalRun{0, size, 1});
  insert_run(range->second, VirtualRun{addr, size, alloc, 0});
  reserved_ += size;
  return true;
}

bool SimDevice::do_alias_pages(Addr dst, Addr src, uint64_t size) {
  RangeIt to = range_of(dst, size, "alias_pages");
  RangeIt from = range_of(src, size, "alias_pages source");
  if (any_mapped(to->second, dst, size)) misuse("alias_pages over pages already mapped");
  std::vector<VirtualRun>& runs = from->second.runs;
  size_t first = cut(runs, src), last = cut(runs, src + size), i = first;
  Addr expect = src;
  for (; i < last && runs[i].addr == expect; ++i) expect += runs[i].size;
  if (expect != src + size) misuse("alias_pages of pages that are not mapped");
  // Copied first: the destination may be the source's own range.
  std::vector<VirtualRun> pieces(runs.begin() + static_cast<ptrdiff_t>(first),
                                 runs.begin() + static_cast<ptrdiff_t>(last));
  for (VirtualRun run : pieces) {
    count_mappings(run.alloc, run.offset, run.size, +1);
    run.addr = dst + (run.addr - src);
    insert_run(to->second, run);
  }
  return true;
}

void SimDevice::do_unmap_pages(Addr addr, uint64_t size) {
  // Within one range, or across adjacent ranges whose pages are all mapped.
  const Addr end = addr + size;
  auto range = ranges_.upper_bound(addr);
  if (range == ranges_.begin()) misuse("unmap_pages of pages that are not mapped");
  --range;
  for (Addr at = addr; at < end; ++range) {
    if (range == ranges_.end() || range->first > at || at >= range->first + range->second.size)
      misuse("unmap_pages of pages that are not mapped");
    const Addr stop = std::min(end, range->first + range->second.size);
    std::vector<VirtualRun>& runs = range->second.runs;
    size_t first = cut(runs, at), last = cut(runs, stop);
    Addr expect = at;
    for (size_t i = first; i < last && runs[i].addr == expect; ++i) expect += runs[i].size;
    if (expect != stop) misuse("unmap_pages of pages that are not mapped");
    for (size_t i = first; i < last; ++i) count_mappings(runs[i].alloc, runs[i].offset, runs[i].size, -1);
    runs.erase(runs.begin() + static_cast<ptrdiff_t>(first), runs.begin() + static_cast<ptrdiff_t>(last));
    at = stop;
  }
}

void SimDevice::do_release_range(Addr addr, uint64_t size) {
  auto it = ranges_.find(addr);
  if (it == ranges_.end() || it->second.size != size) misuse("release_range of an unknown range");
  if (!it->second.runs.empty()) misuse("release_range with pages still mapped");
  ranges_.erase(it);
  addresses_->free_range(addr);
}

}  // namespace fraglab
