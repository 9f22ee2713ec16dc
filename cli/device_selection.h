// `--device` for replay: an integer picks the device inside a PyTorch snapshot (which of
// its per-device traces to read); `sim` or `cuda[:N]` picks where the replay runs. The
// option may be given twice, e.g. `--device 1 --device cuda:0`.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fraglab::cli {

struct DeviceSelection {
  int snapshot_device = 0;
  std::optional<int> cuda;  // set: replay on this CUDA device instead of the simulator
};

struct DeviceArg;
// From the parsed --device values (cli/device_arg.h); throws std::invalid_argument for an
// execution device that is neither `sim` nor `cuda[:N]`.
DeviceSelection device_selection(const DeviceArg& arg);

struct CudaReplayRequest {
  std::string path;
  std::vector<std::string> policies;
  std::string capacity;
  std::string on_oom;
  DeviceSelection device;
  bool touch = false;
  bool json = false;
};

// Runs `fraglab replay ... --device cuda[:N]`; returns the exit code (1: out of memory or
// device memory not returned). Throws std::invalid_argument when built without CUDA.
int run_cuda_replay(const CudaReplayRequest& request);

}  // namespace fraglab::cli
