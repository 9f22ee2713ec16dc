#include "cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "cuda/cuda_error.h"
#include "cuda/driver_api.h"

namespace fraglab::cuda {

namespace {

CUdeviceptr ptr(Addr a) { return static_cast<CUdeviceptr>(a); }

}  // namespace

bool CudaDevice::available(std::string* why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  if (!driver_api().complete) {
    if (why) *why = "the CUDA driver lacks the virtual memory management API";
    return false;
  }
  return true;
}

CudaDevice::CudaDevice(CudaDeviceConfig config) : config_(config) {
  int count = 0;
  FRAGLAB_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (config_.ordinal < 0 || config_.ordinal >= count)
    throw CudaError("cuda:" + std::to_string(config_.ordinal) + ": no such device (this machine has " +
                    std::to_string(count) + ")");
  FRAGLAB_CUDA_CHECK(cudaSetDevice(config_.ordinal));
  FRAGLAB_CUDA_CHECK(cudaFree(nullptr));  // creates the context now, so its memory is not counted later
  cudaDeviceProp props{};
  FRAGLAB_CUDA_CHECK(cudaGetDeviceProperties(&props, config_.ordinal));
  name_ = props.name;
  const DriverApi& api = require_driver_api();
  prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop_.location.id = config_.ordinal;
  size_t granularity = 0;
  FRAGLAB_CUDA_CHECK(api.cuMemGetAllocationGranularity(&granularity, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  granularity_ = granularity;
  reset_driver_baseline();
}

CudaDevice::~CudaDevice() {
  try {
    release_everything();
  } catch (const std::exception&) {
    // A destructor must not throw; the process is ending its use of the GPU anyway.
  }
}

void CudaDevice::reset_driver_baseline() {
  size_t free = 0, total = 0;
  FRAGLAB_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  driver_ = DriverMemory{total, free, free, 0, 0, 1};
}

const DriverMemory& CudaDevice::sample_driver() {
  size_t free = 0, total = 0;
  FRAGLAB_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  driver_.free_now = free;
  driver_.used_now = free < driver_.free_at_start ? driver_.free_at_start - free : 0;
  if (driver_.used_now > driver_.used_peak) driver_.used_peak = driver_.used_now;
  ++driver_.samples;
  return driver_;
}

// --- segments -------------------------------------------------------------------------

std::optional<Addr> CudaDevice::do_allocate_segment(uint64_t size, StreamIndex) {
  if (!fits(size)) return std::nullopt;
  void* p = nullptr;
  cudaError_t status = cudaMalloc(&p, size);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // an out-of-memory is not sticky; clear it so later calls succeed
    return std::nullopt;
  }
  FRAGLAB_CUDA_CHECK(status);
  Addr addr = reinterpret_cast<Addr>(p);
  segments_.emplace(addr, size);
  reserved_ += size;
  sample_driver();
  return addr;
}

void CudaDevice::do_free_segment(Addr addr, uint64_t size) {
  auto it = segments_.find(addr);
  if (it == segments_.end() || it->second != size) misuse("free_segment of an unknown segment");
  FRAGLAB_CUDA_CHECK(cudaFree(reinterpret_cast<void*>(addr)));
  segments_.erase(it);
  reserved_ -= size;
  sample_driver();
}

// --- virtual memory -------------------------------------------------------------------

std::optional<Addr> CudaDevice::do_reserve_range(uint64_t size) {
  CUdeviceptr base = 0;
  CUresult status = require_driver_api().cuMemAddressReserve(&base, size, granularity_, 0, 0);
  if (status == CUDA_ERROR_OUT_OF_MEMORY) return std::nullopt;  // out of virtual address space
  FRAGLAB_CUDA_CHECK(status);
  ranges_.emplace(static_cast<Addr>(base), size);
  return static_cast<Addr>(base);
}

void CudaDevice::check_in_range(Addr addr, uint64_t size, const char* call) const {
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin() || addr + size > std::prev(it)->first + std::prev(it)->second)
    misuse(std::string(call) + " outside a reserved range");
}

bool CudaDevice::map_one_page(Addr page) {
  const DriverApi& api = require_driver_api();
  CUmemGenericAllocationHandle handle = 0;
  CUresult status = api.cuMemCreate(&handle, granularity_, &prop_, 0);
  if (status == CUDA_ERROR_OUT_OF_MEMORY) return false;
  FRAGLAB_CUDA_CHECK(status);
  status = api.cuMemMap(ptr(page), granularity_, 0, handle, 0);
  // The mapping holds the physical page from here on; our handle is not needed any more
  // (cuMemRetainAllocationHandle gives one back for aliasing).
  CUresult released = api.cuMemRelease(handle);
  FRAGLAB_CUDA_CHECK(status);
  FRAGLAB_CUDA_CHECK(released);
  uint64_t physical = next_physical_id_++;
  pages_.emplace(page, physical);
  physical_mappings_.emplace(physical, 1);
  return true;
}

void CudaDevice::set_access(Addr addr, uint64_t size) {
  CUmemAccessDesc access{};
  access.location = prop_.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  FRAGLAB_CUDA_CHECK(require_driver_api().cuMemSetAccess(ptr(addr), size, &access, 1));
}

bool CudaDevice::do_map_pages(Addr addr, uint64_t size, StreamIndex) {
  check_in_range(addr, size, "map_pages");
  for (Addr page = addr; page < addr + size; page += granularity_)
    if (pages_.count(page)) misuse("map_pages over pages already mapped");
  if (!fits(size)) return false;
  for (Addr page = addr; page < addr + size; page += granularity_) {
    if (map_one_page(page)) continue;
    // Out of memory part way: undo this call's pages, as a real allocator must.
    for (Addr done = addr; done < page; done += granularity_) unmap_one_page(done);
    sample_driver();
    return false;
  }
  set_access(addr, size);
  reserved_ += size;
  sample_driver();
  return true;
}

void CudaDevice::map_existing(Addr dst, uint64_t physical) {
  pages_.emplace(dst, physical);
  ++physical_mappings_[physical];
}

bool CudaDevice::do_alias_pages(Addr dst, Addr src, uint64_t size) {
  check_in_range(dst, size, "alias_pages");
  for (uint64_t off = 0; off < size; off += granularity_) {
    if (pages_.count(dst + off)) misuse("alias_pages over pages already mapped");
    if (!pages_.count(src + off)) misuse("alias_pages of pages not mapped");
  }
  const DriverApi& api = require_driver_api();
  for (uint64_t off = 0; off < size; off += granularity_) {
    CUmemGenericAllocationHandle handle = 0;
    FRAGLAB_CUDA_CHECK(api.cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(src + off)));
    CUresult status = api.cuMemMap(ptr(dst + off), granularity_, 0, handle, 0);
    CUresult released = api.cuMemRelease(handle);  // the retain took a reference; give it back
    FRAGLAB_CUDA_CHECK(status);
    FRAGLAB_CUDA_CHECK(released);
    map_existing(dst + off, pages_.at(src + off));
  }
  set_access(dst, size);
  sample_driver();
  return true;
}

void CudaDevice::unmap_one_page(Addr page) {
  auto it = pages_.find(page);
  FRAGLAB_CUDA_CHECK(require_driver_api().cuMemUnmap(ptr(page), granularity_));
  auto refs = physical_mappings_.find(it->second);
  if (--refs->second == 0) physical_mappings_.erase(refs);
  pages_.erase(it);
}

void CudaDevice::do_unmap_pages(Addr addr, uint64_t size) {
  check_in_range(addr, size, "unmap_pages");
  for (Addr page = addr; page < addr + size; page += granularity_)
    if (!pages_.count(page)) misuse("unmap_pages of unmapped pages");
  // Unlike cudaFree, cuMemUnmap does not wait for work queued on the memory; PyTorch's
  // ExpandableSegment synchronizes before unmapping for the same reason.
  FRAGLAB_CUDA_CHECK(cudaDeviceSynchronize());
  uint64_t physical_before = physical_mappings_.size();
  for (Addr page = addr; page < addr + size; page += granularity_) unmap_one_page(page);
  reserved_ -= (physical_before - physical_mappings_.size()) * granularity_;
  sample_driver();
}

void CudaDevice::do_release_range(Addr addr, uint64_t size) {
  auto it = ranges_.find(addr);
  if (it == ranges_.end() || it->second != size) misuse("release_range of an unknown range");
  auto mapped = pages_.lower_bound(addr);
  if (mapped != pages_.end() && mapped->first < addr + size) misuse("release_range with pages still mapped");
  FRAGLAB_CUDA_CHECK(require_driver_api().cuMemAddressFree(ptr(addr), size));
  ranges_.erase(it);
}

uint64_t CudaDevice::release_everything() {
  uint64_t held = reserved_;
  FRAGLAB_CUDA_CHECK(cudaDeviceSynchronize());
  while (!segments_.empty()) {
    auto [addr, size] = *segments_.begin();
    free_segment(addr, size);
  }
  std::vector<Addr> mapped;
  mapped.reserve(pages_.size());
  for (const auto& entry : pages_) mapped.push_back(entry.first);
  for (Addr page : mapped) unmap_one_page(page);
  reserved_ = 0;
  while (!ranges_.empty()) {
    auto [addr, size] = *ranges_.begin();
    release_range(addr, size);
  }
  sample_driver();
  return held;
}

}  // namespace fraglab::cuda
