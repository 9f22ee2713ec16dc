// `fraglab replay ... --device cuda[:N]`: the replay on a real GPU (cuda/cuda_replay.h),
// reached from cmd_replay.cpp when the execution device (cli/device_arg.h) is a GPU.
#pragma once

#include <string>
#include <vector>

#include "traces/trace_io.h"

namespace fraglab::cli {

struct CudaReplayRequest {
  std::string path;
  std::vector<std::string> policies;
  std::string capacity;
  std::string on_oom;
  int trace_device = kAnyDevice;  // which device's trace to read from a snapshot
  std::string exec_device;        // "cuda" or "cuda:N"
  bool touch = false;
  bool json = false;
};

// Returns the exit code (1: out of memory, or free device memory did not come back).
// Throws std::invalid_argument for a malformed device, no usable GPU, or a build
// without CUDA.
int run_cuda_replay(const CudaReplayRequest& request);

}  // namespace fraglab::cli
