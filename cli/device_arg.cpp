#include "cli/device_arg.h"

#include <charconv>
#include <stdexcept>

namespace fraglab::cli {

void parse_device_arg(const std::string& text, DeviceArg& out) {
  if (text.rfind("cuda", 0) == 0 || text.rfind("sim", 0) == 0) {
    out.exec_device = text;
    return;
  }
  int n = -1;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || n < 0)
    throw std::invalid_argument("--device '" + text +
                                "': expected a snapshot device index (0, 1, ...) or an execution device "
                                "(sim, cuda, cuda:N)");
  out.trace_device = n;
}

DeviceArg DeviceOptions::resolve() const {
  DeviceArg arg;
  for (const auto& d : device) parse_device_arg(d, arg);
  if (trace_device >= 0) arg.trace_device = trace_device;
  return arg;
}

int DeviceOptions::simulated_trace_device(const std::string& why) const {
  const DeviceArg arg = resolve();
  if (!arg.exec_device.empty() && arg.exec_device != "sim")
    throw std::invalid_argument("--device " + arg.exec_device + ": " + why);
  return arg.trace_device;
}

void add_device_options(CLI::App* cmd, DeviceOptions& options) {
  cmd->add_option("--device", options.device,
                  "A PyTorch snapshot's device index (default 0, or the one device with data when 0 has none: "
                  "a DDP/FSDP rank's snapshot), or the execution device (sim, cuda[:N])")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--trace-device", options.trace_device,
                  "Device index in a PyTorch snapshot (default 0, or the one device with data when 0 has none)")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace fraglab::cli
