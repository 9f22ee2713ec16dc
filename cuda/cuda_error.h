// Errors from the CUDA runtime and driver, as exceptions that name the call.
//
// Out-of-memory is not an error here: the device reports it to the policy (nullopt /
// false) exactly as the simulated device does, and callers test for it before they
// reach these helpers. Anything else (a bad pointer, a lost device) is a CudaError,
// which the CLI turns into a message and exit code 2.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace fraglab::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_runtime_error(cudaError_t status, const char* call);
[[noreturn]] void throw_driver_error(CUresult status, const char* call);

inline void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw_runtime_error(status, call);
}
inline void check(CUresult status, const char* call) {
  if (status != CUDA_SUCCESS) throw_driver_error(status, call);
}

}  // namespace fraglab::cuda

// FRAGLAB_CUDA_CHECK(cudaMalloc(&p, n)): throws CudaError naming the call on failure.
#define FRAGLAB_CUDA_CHECK(call) ::fraglab::cuda::check((call), #call)
