#include "cli/cmd_replay_gpu.h"

#include <fmt/core.h>

#include <cctype>
#include <stdexcept>

#include "traces/trace_io.h"
#include "traces/trace_stats.h"

#if FRAGLAB_HAVE_CUDA
#include "allocators/policy_options.h"
#include "cuda/cuda_report.h"
#include "import/trace_import.h"
#include "sim/capacity.h"
#endif

namespace fraglab::cli {

namespace {

// "cuda" -> 0, "cuda:N" -> N; anything else is a usage error.
int cuda_ordinal(const std::string& text) {
  if (text == "cuda") return 0;
  std::string n = text.rfind("cuda:", 0) == 0 ? text.substr(5) : "";
  bool digits = !n.empty() && n.size() < 5;
  for (char c : n) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits) throw std::invalid_argument("--device '" + text + "': expected sim, cuda or cuda:N");
  return std::stoi(n);
}

}  // namespace

#if FRAGLAB_HAVE_CUDA

int run_cuda_replay(const CudaReplayRequest& request) {
  cuda::CudaReplayOptions options;
  options.ordinal = cuda_ordinal(request.exec_device);
  std::string why;
  if (!cuda::CudaDevice::available(&why)) throw std::invalid_argument("--device cuda: no usable GPU (" + why + ")");
  Trace trace = load_trace(request.path, {request.trace_device});
  // As on the simulator: a recording that ran out of memory replays under the limit it shows.
  std::string note;
  options.capacity = capacity_for(
      trace, request.capacity.empty() ? std::nullopt : std::optional<uint64_t>(parse_size(request.capacity)), &note);
  if (!note.empty()) fmt::print(stderr, "note: {}\n", note);
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
    fmt::print("{}\n", nlohmann::json{{"schema_version", kJsonSchemaVersion},
                                      {"command", "replay"},
                                      {"trace", request.path},
                                      {"device", request.exec_device},
                                      {"results", out}}
                           .dump(2));
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

int run_cuda_replay(const CudaReplayRequest& request) {
  cuda_ordinal(request.exec_device);
  throw std::invalid_argument("--device " + request.exec_device +
                              ": this fraglab was built without CUDA (FRAGLAB_CUDA=OFF or no toolkit)");
}

#endif

}  // namespace fraglab::cli
