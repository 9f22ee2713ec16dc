// Two options, one meaning each (issue 42):
//   --gpu N (alias --trace-device N)  which GPU's history to read from a PyTorch snapshot of several
//   --device sim|cuda|cuda:N          the device a replay executes on (default sim, the simulated device)
// An integer given to --device is refused with the --gpu spelling in the message: before, --device took
// both, and `--device 1` read as either. Every command parses them through DeviceOptions, so they behave
// the same everywhere.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "traces/trace_io.h"

namespace fraglab::cli {

struct DeviceArg {
  int trace_device = kAnyDevice;  // snapshot device_traces index (default: the device with data)
  std::string exec_device;        // "" (default: simulated), "sim", "cuda", "cuda:N"
};

// Checks one --device value (sim, cuda, cuda:N); throws std::invalid_argument naming the value otherwise,
// with the --gpu spelling for an integer.
void parse_device_arg(const std::string& text, DeviceArg& out);

// The raw option values of one command, resolved when the command runs (so that a bad value is a usage
// error with exit code 2, reported like every other).
struct DeviceOptions {
  std::string device;     // --device
  int trace_device = -1;  // --gpu / --trace-device
  bool executes = true;   // false: the command reads the trace and runs nothing; any --device is refused
  DeviceArg resolve() const;
  // For a command that runs on the simulated device only: the snapshot's GPU; an execution device other
  // than sim throws std::invalid_argument "--device D: " + `why`.
  int simulated_trace_device(const std::string& why) const;
};

// --gpu/--trace-device and --device. `executes`: the command replays (tune, diagnose, ...); a command that
// only reads a trace (info, convert, export, ops) refuses --device with a message pointing to --gpu.
void add_device_options(CLI::App* cmd, DeviceOptions& options, bool executes = true);

}  // namespace fraglab::cli
