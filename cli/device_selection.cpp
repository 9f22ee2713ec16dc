#include "cli/device_selection.h"

#include "cli/device_arg.h"

#include <fmt/core.h>

#include <cctype>
#include <stdexcept>

#include "traces/trace_io.h"
#include "traces/trace_stats.h"

#if FRAGLAB_HAVE_CUDA
#include "allocators/policy_options.h"
#include "cuda/cuda_report.h"
#endif

namespace fraglab::cli {

namespace {

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

DeviceSelection device_selection(const DeviceArg& arg) {
  DeviceSelection out;
  out.snapshot_device = arg.trace_device;
  const std::string& v = arg.exec_device;
  if (v.empty() || v == "sim") {
    out.cuda.reset();
  } else if (v == "cuda") {
    out.cuda = 0;
  } else if (v.rfind("cuda:", 0) == 0 && all_digits(v.substr(5)) && v.size() < 11) {
    out.cuda = std::stoi(v.substr(5));
  } else {
    throw std::invalid_argument("--device '" + v + "': expected 'sim' or 'cuda[:N]' as the execution device");
  }
  return out;
}

#if FRAGLAB_HAVE_CUDA

int run_cuda_replay(const CudaReplayRequest& request) {
  std::string why;
  if (!cuda::CudaDevice::available(&why)) throw std::invalid_argument("--device cuda: no usable GPU (" + why + ")");
  Trace trace = load_trace(request.path, {request.device.snapshot_device});
  cuda::CudaReplayOptions options;
  options.ordinal = *request.device.cuda;
  if (!request.capacity.empty()) options.capacity = parse_size(request.capacity);
  options.touch = request.touch;
  options.on_oom = request.on_oom == "skip" ? OnOom::Skip : OnOom::Stop;
  std::vector<cuda::CudaReplayResult> results;
  for (const auto& policy : request.policies) results.push_back(cuda::replay_on_cuda(trace, policy, options));

  if (request.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results) {
      auto j = cuda::to_json(r);
      j["trace"] = request.path;
      out.push_back(j);
    }
    fmt::print("{}\n", (results.size() == 1 ? out[0] : out).dump(2));
  } else {
    MemorySource source(trace);
    fmt::print("trace {}: live-bytes bound {} bytes\n", request.path, compute_stats(source).peak_live_requested);
    fmt::print("{}", cuda::format_table(results));
  }
  int code = 0;
  for (const auto& r : results)
    if (r.counted.stopped_on_oom || !cuda::memory_returned(r)) code = 1;
  return code;
}

#else

int run_cuda_replay(const CudaReplayRequest&) {
  throw std::invalid_argument("--device cuda: this fraglab was built without CUDA (FRAGLAB_CUDA=OFF or no toolkit)");
}

#endif

}  // namespace fraglab::cli
