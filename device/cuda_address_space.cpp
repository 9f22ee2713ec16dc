#include "device/cuda_address_space.h"

#include <algorithm>
#include <stdexcept>

namespace fraglab {

namespace {
uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }
uint64_t round_down(uint64_t n, uint64_t to) { return n / to * to; }
}  // namespace

CudaAddressSpace::CudaAddressSpace(CudaAddressLayout layout) : layout_(std::move(layout)) {
  if (layout_.vmm_base >= layout_.context_base || layout_.context_base > kAddressSpaceEnd ||
      layout_.context_size > kAddressSpaceEnd - layout_.context_base)
    throw std::logic_error("CudaAddressLayout: the address space must lie below 2^48");
  // Free address space: everything between the reserve region's start and the context's chunk.
  free_.emplace(layout_.vmm_base, layout_.context_base - layout_.vmm_base);
  Chunk context{layout_.context_base, layout_.context_size, {}, 0, 0, 1};
  for (const auto& [offset, size] : layout_.context_free) {
    context.gaps.emplace(layout_.context_base + offset, size);
    context.free_bytes += size;
    context.gap_bound = std::max(context.gap_bound, size);
  }
  chunks_.emplace(next_age_++, std::move(context));
}

uint64_t CudaAddressSpace::need(uint64_t size) const { return round_up(size == 0 ? 1 : size, layout_.small); }

std::optional<Addr> CudaAddressSpace::fit_in(Chunk& chunk, uint64_t need, uint64_t align) {
  uint64_t largest = 0;
  for (auto it = chunk.gaps.begin(); it != chunk.gaps.end(); ++it) {
    auto [begin, size] = *it;
    largest = std::max(largest, size);
    Addr at = round_up(begin, align);
    if (at + need > begin + size) continue;
    chunk.gaps.erase(it);
    if (at > begin) chunk.gaps.emplace(begin, at - begin);
    if (at + need < begin + size) chunk.gaps.emplace(at + need, begin + size - at - need);
    chunk.free_bytes -= need;
    ++chunk.live;
    return at;
  }
  chunk.gap_bound = largest;  // every gap was seen
  return std::nullopt;
}

std::optional<Addr> CudaAddressSpace::fit_in_chunks(uint64_t size) {
  uint64_t bytes = need(size);
  uint64_t align = bytes >= layout_.page ? layout_.page : layout_.small;
  for (auto it = chunks_.rbegin(); it != chunks_.rend(); ++it) {
    // No gap can hold it: skipped without a search (the bound only ever overstates).
    if (it->second.free_bytes < bytes || it->second.gap_bound < bytes) continue;
    if (auto at = fit_in(it->second, bytes, align)) {
      allocations_.emplace(*at, std::make_pair(bytes, it->first));
      return at;
    }
  }
  return std::nullopt;
}

std::optional<Addr> CudaAddressSpace::place_segment(uint64_t size) {
  if (size > kAddressSpaceEnd) return std::nullopt;  // more than any address space holds
  if (auto at = fit_in_chunks(size)) return *at;
  return carve(need(size), true);
}

std::optional<Addr> CudaAddressSpace::place_range(uint64_t size) {
  if (size > kAddressSpaceEnd) return std::nullopt;
  return carve(need(size), false);
}

std::optional<Addr> CudaAddressSpace::carve(uint64_t bytes, bool top_down) {
  // bytes <= 2^48, so neither rounding nor the slack below can overflow.
  const uint64_t csize = round_up(bytes, layout_.chunk);
  if (top_down) {
    for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
      auto [begin, size] = *it;
      // The driver asks for the chunk plus its alignment slack: an exactly fitting hole is passed over.
      if (size < csize + layout_.chunk - layout_.page) continue;
      Addr at = round_down(begin + size - csize, layout_.chunk);
      if (at >= begin) return new_chunk(at, csize, bytes);
    }
  } else {
    for (auto [begin, size] : free_) {
      Addr at = round_up(begin, layout_.chunk);
      if (at + csize <= begin + size) return new_chunk(at, csize, bytes);
    }
  }
  return std::nullopt;  // no free range below 2^48 holds it: out of memory
}

Addr CudaAddressSpace::new_chunk(Addr base, uint64_t csize, uint64_t used) {
  take_free(base, csize);
  Chunk chunk{base, csize, {}, csize - used, csize - used, 1};
  if (used < csize) chunk.gaps.emplace(base + used, csize - used);
  Age age = next_age_++;
  chunks_.emplace(age, std::move(chunk));
  allocations_.emplace(base, std::make_pair(used, age));
  return base;
}

void CudaAddressSpace::take_free(Addr begin, uint64_t size) {
  auto it = std::prev(free_.upper_bound(begin));
  auto [fbegin, fsize] = *it;
  free_.erase(it);
  if (begin > fbegin) free_.emplace(fbegin, begin - fbegin);
  if (begin + size < fbegin + fsize) free_.emplace(begin + size, fbegin + fsize - begin - size);
}

void CudaAddressSpace::add_free(Addr begin, uint64_t size) {
  auto next = free_.lower_bound(begin);
  if (next != free_.end() && next->first == begin + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == begin) {
      prev->second += size;
      return;
    }
  }
  free_.emplace(begin, size);
}

void CudaAddressSpace::give_back(Addr addr) {
  auto it = allocations_.find(addr);
  if (it == allocations_.end()) throw std::logic_error("device misuse: freeing an address never handed out");
  auto [bytes, age] = it->second;
  allocations_.erase(it);
  Chunk& chunk = chunks_.at(age);
  if (--chunk.live == 0) {  // the chunk's last allocation: its address space goes back
    add_free(chunk.base, chunk.size);
    chunks_.erase(age);
    return;
  }
  Addr begin = addr;
  uint64_t size = bytes;
  auto next = chunk.gaps.lower_bound(begin);
  if (next != chunk.gaps.end() && next->first == begin + size) {
    size += next->second;
    next = chunk.gaps.erase(next);
  }
  if (next != chunk.gaps.begin() && std::prev(next)->first + std::prev(next)->second == begin) {
    std::prev(next)->second += size;
    size = std::prev(next)->second;
  } else {
    chunk.gaps.emplace(begin, size);
  }
  chunk.free_bytes += bytes;
  chunk.gap_bound = std::max(chunk.gap_bound, size);
}

}  // namespace fraglab
