// The driver API functions fraglab calls (virtual memory management), looked up at run
// time through the CUDA runtime's cudaGetDriverEntryPointByVersion.
//
// Why not link libcuda: the driver library exists only where a GPU driver is installed.
// Looking the functions up (as PyTorch's c10/cuda/driver_api does) keeps every fraglab
// binary loadable on machines without a driver, where the CUDA tests then skip instead
// of the test binary failing to start.
#pragma once

#include <cuda.h>

namespace fraglab::cuda {

struct DriverApi {
#define FRAGLAB_DRIVER_FN(name) decltype(&::name) name = nullptr;
  FRAGLAB_DRIVER_FN(cuGetErrorName)
  FRAGLAB_DRIVER_FN(cuGetErrorString)
  FRAGLAB_DRIVER_FN(cuMemGetAllocationGranularity)
  FRAGLAB_DRIVER_FN(cuMemAddressReserve)
  FRAGLAB_DRIVER_FN(cuMemAddressFree)
  FRAGLAB_DRIVER_FN(cuMemCreate)
  FRAGLAB_DRIVER_FN(cuMemRelease)
  FRAGLAB_DRIVER_FN(cuMemMap)
  FRAGLAB_DRIVER_FN(cuMemUnmap)
  FRAGLAB_DRIVER_FN(cuMemSetAccess)
  FRAGLAB_DRIVER_FN(cuMemRetainAllocationHandle)
#undef FRAGLAB_DRIVER_FN
  bool complete = false;  // every function above was found
};

// Looked up once; functions the driver lacks stay null (complete = false).
const DriverApi& driver_api();
// driver_api(), or a CudaError saying which function is missing.
const DriverApi& require_driver_api();

}  // namespace fraglab::cuda
