#include "cuda/cuda_error.h"

#include "cuda/driver_api.h"

namespace fraglab::cuda {

void throw_runtime_error(cudaError_t status, const char* call) {
  throw CudaError(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void throw_driver_error(CUresult status, const char* call) {
  const char* name = nullptr;
  const char* text = nullptr;
  // The driver's own error strings come through the entry points too: this program does
  // not link libcuda (see driver_api.h).
  const DriverApi& api = driver_api();
  if (api.cuGetErrorName) api.cuGetErrorName(status, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(status, &text);
  throw CudaError(std::string(call) + " failed: " + (name ? name : "CUDA driver error " + std::to_string(status)) +
                  (text ? std::string(" (") + text + ")" : std::string()));
}

}  // namespace fraglab::cuda
