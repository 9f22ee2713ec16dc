#include "cli/device_arg.h"

#include <charconv>
#include <stdexcept>

namespace fraglab::cli {

void parse_device_arg(const std::string& text, DeviceArg& out) {
  if (text == "sim" || text == "cuda" || text.rfind("cuda:", 0) == 0) {
    out.exec_device = text;
    return;
  }
  int n = -1;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (!text.empty() && ec == std::errc() && ptr == text.data() + text.size() && n >= 0)
    throw std::invalid_argument("--device '" + text +
                                "': --device is the device a replay runs on (sim, cuda, cuda:N); the snapshot's GPU " +
                                text + " is --gpu " + text);
  throw std::invalid_argument("--device '" + text + "': expected sim, cuda or cuda:N (the snapshot's GPU is --gpu N)");
}

DeviceArg DeviceOptions::resolve() const {
  DeviceArg arg;
  if (!device.empty()) parse_device_arg(device, arg);
  if (!executes && !arg.exec_device.empty())
    throw std::invalid_argument("--device " + device +
                                ": this command reads the trace and runs nothing on a device; the snapshot's GPU "
                                "is --gpu N");
  if (trace_device >= 0) arg.trace_device = trace_device;
  return arg;
}

int DeviceOptions::simulated_trace_device(const std::string& why) const {
  const DeviceArg arg = resolve();
  if (!arg.exec_device.empty() && arg.exec_device != "sim")
    throw std::invalid_argument("--device " + arg.exec_device + ": " + why);
  return arg.trace_device;
}

void add_device_options(CLI::App* cmd, DeviceOptions& options, bool executes) {
  cmd->add_option("--gpu,--trace-device", options.trace_device,
                  "Which GPU's history to read from a PyTorch snapshot of several (default 0, or the one device "
                  "with data when 0 has none: a DDP/FSDP rank's snapshot)")
      ->check(CLI::NonNegativeNumber);
  options.executes = executes;
  cmd->add_option("--device", options.device,
                  executes ? "The device the replay runs on: sim (default, the simulated device), or cuda / cuda:N "
                             "for replay (docs/gpu.md). The snapshot's GPU is --gpu"
                           : "Not taken: this command runs nothing (the snapshot's GPU is --gpu)");
}

}  // namespace fraglab::cli
