// One `--device` option, two meanings, so that commands stay simple to type:
//   an integer              -> which device's trace to read from a PyTorch snapshot
//   "sim", "cuda", "cuda:N" -> the device the replay executes on
// `--trace-device N` names the snapshot device explicitly. Every command parses the
// option through parse_device_arg, so both meanings behave the same everywhere.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "traces/trace_io.h"

namespace fraglab::cli {

struct DeviceArg {
  int trace_device = kAnyDevice;  // snapshot device_traces index (default: the device with data)
  std::string exec_device;        // "" (default: simulated), "sim", "cuda", "cuda:N"
};

// Parses one --device value into `out`; throws std::invalid_argument naming the value
// when it is neither form.
void parse_device_arg(const std::string& text, DeviceArg& out);

// The raw option values of one command, resolved when the command runs (so that a bad
// value is a usage error with exit code 2, reported like every other).
struct DeviceOptions {
  std::vector<std::string> device;  // --device, may be given twice (a snapshot index and cuda:N)
  int trace_device = -1;            // --trace-device
  DeviceArg resolve() const;
  // For a command that runs on the simulated device only: the snapshot's device; an execution device
  // other than sim throws std::invalid_argument "--device D: " + `why`.
  int simulated_trace_device(const std::string& why) const;
};

void add_device_options(CLI::App* cmd, DeviceOptions& options);

}  // namespace fraglab::cli
