#include "cuda/driver_api.h"

#include <cuda_runtime_api.h>

#include <string>

#include "cuda/cuda_error.h"

namespace fraglab::cuda {

namespace {

// The ABI version we ask the entry points for: every function above has had its current
// signature since CUDA 12.0.
constexpr unsigned kDriverAbiVersion = 12000;

template <typename Fn>
bool look_up(const char* symbol, Fn& out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, kDriverAbiVersion, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later runtime calls are not blamed
    return false;
  }
  out = reinterpret_cast<Fn>(fn);
  return true;
}

DriverApi load() {
  DriverApi api;
  bool ok = true;
#define FRAGLAB_LOOK_UP(name) ok &= look_up(#name, api.name);
  FRAGLAB_LOOK_UP(cuGetErrorName)
  FRAGLAB_LOOK_UP(cuGetErrorString)
  FRAGLAB_LOOK_UP(cuMemGetAllocationGranularity)
  FRAGLAB_LOOK_UP(cuMemAddressReserve)
  FRAGLAB_LOOK_UP(cuMemAddressFree)
  FRAGLAB_LOOK_UP(cuMemCreate)
  FRAGLAB_LOOK_UP(cuMemRelease)
  FRAGLAB_LOOK_UP(cuMemMap)
  FRAGLAB_LOOK_UP(cuMemUnmap)
  FRAGLAB_LOOK_UP(cuMemSetAccess)
  FRAGLAB_LOOK_UP(cuMemRetainAllocationHandle)
#undef FRAGLAB_LOOK_UP
  api.complete = ok;
  return api;
}

}  // namespace

const DriverApi& driver_api() {
  static const DriverApi api = load();
  return api;
}

const DriverApi& require_driver_api() {
  const DriverApi& api = driver_api();
  if (!api.complete)
    throw CudaError("the CUDA driver lacks the virtual memory management API (cuMemCreate and friends)");
  return api;
}

}  // namespace fraglab::cuda
