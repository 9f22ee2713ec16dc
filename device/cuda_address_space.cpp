#include "device/cuda_address_space.h"

#include <algorithm>
#include <stdexcept>

namespace fraglab {

namespace {
// Masks when `to` is a power of two (every measured layout's are): every cudaMalloc rounds, and a
// 64-bit division costs tens of cycles. (std::has_single_bit is a library call without -mpopcnt.)
bool pow2(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }
uint64_t round_down(uint64_t n, uint64_t to) { return pow2(to) ? n & ~(to - 1) : n / to * to; }
uint64_t round_up(uint64_t n, uint64_t to) { return round_down(n + to - 1, to); }
}  // namespace

CudaAddressSpace::CudaAddressSpace(CudaAddressLayout layout) : layout_(std::move(layout)) {
  if (layout_.vmm_base >= layout_.context_base || layout_.context_base > kAddressSpaceEnd ||
      layout_.context_size > kAddressSpaceEnd - layout_.context_base)
    throw std::logic_error("CudaAddressLayout: the address space must lie below 2^48");
  // Free address space: everything between the reserve region's start and the context's chunk.
  free_.emplace(layout_.vmm_base, layout_.context_base - layout_.vmm_base);
  Chunk context{layout_.context_base, layout_.context_size, next_age_++, {}, 0, 0, 1};
  std::vector<std::pair<uint64_t, uint64_t>> gaps = layout_.context_free;
  std::sort(gaps.begin(), gaps.end());
  for (const auto& [offset, size] : gaps) {
    context.gaps.push_back({layout_.context_base + offset, size});
    context.free_bytes += size;
    context.gap_bound = std::max(context.gap_bound, size);
  }
  chunks_.push_back(std::move(context));
  keys_.push_back({});
  refresh(0);
}

void CudaAddressSpace::refresh(size_t index) {
  const Chunk& chunk = chunks_[index];
  keys_[index] = {chunk.age, std::min(chunk.free_bytes, chunk.gap_bound)};
}

uint64_t CudaAddressSpace::need(uint64_t size) const { return round_up(size == 0 ? 1 : size, layout_.small); }

// Takes [at, at+bytes) out of gap `gap` of the chunk, which holds it.
void CudaAddressSpace::take_from_gap(Chunk& chunk, size_t gap, Addr at, uint64_t bytes) {
  auto& gaps = chunk.gaps;
  const Gap g = gaps[gap];
  const auto pos = gaps.begin() + static_cast<std::ptrdiff_t>(gap);
  const bool head = at > g.begin, tail = at + bytes < g.begin + g.size;
  const Gap rest{at + bytes, g.begin + g.size - at - bytes};
  if (head && tail) {
    pos->size = at - g.begin;
    gaps.insert(pos + 1, rest);
  } else if (head) {
    pos->size = at - g.begin;
  } else if (tail) {
    *pos = rest;
  } else {
    gaps.erase(pos);
  }
  chunk.free_bytes -= bytes;
  ++chunk.live;
}

std::optional<Addr> CudaAddressSpace::fit_in(Chunk& chunk, uint64_t need, uint64_t align) {
  uint64_t largest = 0;
  for (size_t i = 0; i < chunk.gaps.size(); ++i) {
    const auto [begin, size] = chunk.gaps[i];
    largest = std::max(largest, size);
    if (size < need) continue;
    Addr at = round_up(begin, align);
    if (at + need > begin + size) continue;
    take_from_gap(chunk, i, at, need);
    return at;
  }
  chunk.gap_bound = largest;  // every gap was seen
  return std::nullopt;
}

std::optional<Addr> CudaAddressSpace::fit_in_chunks(uint64_t size) {
  uint64_t bytes = need(size);
  uint64_t align = bytes >= layout_.page ? layout_.page : layout_.small;
  for (size_t i = keys_.size(); i-- > 0;) {
    // No gap can hold it: skipped without a search (the bound only ever overstates).
    if (keys_[i].room < bytes) continue;
    std::optional<Addr> at = fit_in(chunks_[i], bytes, align);
    refresh(i);
    if (at) {
      allocations_.emplace(*at, Allocation{bytes, keys_[i].age});
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
    for (auto it = free_.end(); it != free_.begin();) {
      --it;
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
  Chunk chunk{base, csize, next_age_++, {}, csize - used, csize - used, 1};
  if (used < csize) chunk.gaps.push_back({base + used, csize - used});
  allocations_.emplace(base, Allocation{used, chunk.age});
  chunks_.push_back(std::move(chunk));
  keys_.push_back({});
  refresh(chunks_.size() - 1);
  return base;
}

bool CudaAddressSpace::place_at(Addr addr, uint64_t size) {
  if (addr > kAddressSpaceEnd || size > kAddressSpaceEnd - addr) return false;
  const uint64_t bytes = need(size);
  for (size_t i = 0; i < chunks_.size(); ++i) {
    Chunk& chunk = chunks_[i];
    if (addr < chunk.base || addr >= chunk.base + chunk.size) continue;
    auto gap =
        std::upper_bound(chunk.gaps.begin(), chunk.gaps.end(), addr, [](Addr a, const Gap& g) { return a < g.begin; });
    if (gap == chunk.gaps.begin() || addr + bytes > std::prev(gap)->begin + std::prev(gap)->size) return false;
    take_from_gap(chunk, static_cast<size_t>(gap - chunk.gaps.begin() - 1), addr, bytes);
    refresh(i);
    allocations_.emplace(addr, Allocation{bytes, chunk.age});
    return true;
  }
  auto it = free_.upper_bound(addr);
  if (it == free_.begin() || addr + bytes > std::prev(it)->first + std::prev(it)->second) return false;
  new_chunk(addr, bytes, bytes);
  return true;
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

size_t CudaAddressSpace::index_of_age(Age age) const {
  auto it = std::lower_bound(keys_.begin(), keys_.end(), age, [](const ChunkKey& k, Age a) { return k.age < a; });
  return static_cast<size_t>(it - keys_.begin());  // every allocation's chunk lives while the allocation does
}

void CudaAddressSpace::give_back(Addr addr) {
  const Allocation* taken = allocations_.find(addr);
  if (!taken) throw std::logic_error("device misuse: freeing an address never handed out");
  const auto [bytes, age] = *taken;
  allocations_.erase(addr);
  const size_t index = index_of_age(age);
  Chunk& chunk = chunks_[index];
  if (--chunk.live == 0) {  // the chunk's last allocation: its address space goes back
    add_free(chunk.base, chunk.size);
    chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(index));
    keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(index));
    return;
  }
  auto& gaps = chunk.gaps;
  auto next = std::lower_bound(gaps.begin(), gaps.end(), addr, [](const Gap& g, Addr a) { return g.begin < a; });
  Gap merged{addr, bytes};
  if (next != gaps.end() && next->begin == addr + bytes) {
    merged.size += next->size;
    next = gaps.erase(next);
  }
  if (next != gaps.begin() && std::prev(next)->begin + std::prev(next)->size == addr) {
    std::prev(next)->size += merged.size;
    merged = *std::prev(next);
  } else {
    gaps.insert(next, merged);
  }
  chunk.free_bytes += bytes;
  chunk.gap_bound = std::max(chunk.gap_bound, merged.size);
  refresh(index);
}

}  // namespace fraglab
