#include "cuda/cuda_report.h"

#include <fmt/core.h>

#include "allocators/policy_options.h"
#include "sim/result_json.h"

namespace fraglab::cuda {

nlohmann::json to_json(const LatencySummary& s) {
  return {{"count", s.count}, {"mean_ns", s.mean_ns}, {"p50_ns", s.p50_ns}, {"p99_ns", s.p99_ns}, {"max_ns", s.max_ns}};
}

nlohmann::json to_json(const CudaReplayResult& r) {
  nlohmann::json j = {
      {"policy", r.policy},
      {"kind", r.kind},
      {"device", fmt::format("cuda:{}", r.ordinal)},
      {"gpu", r.gpu},
      {"touch", r.touched},
      {"latency", {{"malloc", to_json(r.malloc_latency)}, {"free", to_json(r.free_latency)}}},
      {"reserved_peak",
       {{"driver", r.driver.used_peak},
        {"counted", r.counted.reserved.bytes},
        {"simulated", r.simulated ? nlohmann::json(r.simulated->reserved.bytes) : nlohmann::json()}}},
      {"driver", {{"total", r.driver.total}, {"samples", r.driver.samples}, {"used_peak", r.driver.used_peak}}},
      {"free_memory", {{"before", r.free_before}, {"after", r.free_after}, {"returned", memory_returned(r)}}},
      {"held_at_end", r.held_at_end},
      {"replay_seconds", r.seconds},
      {"counted", fraglab::to_json(r.counted)},
  };
  if (r.simulated) j["simulated"] = fraglab::to_json(*r.simulated);
  if (r.pool_reserved_high)
    j["pool"] = {{"reserved_mem_high", *r.pool_reserved_high}, {"used_mem_high", *r.pool_used_high}};
  return j;
}

namespace {

std::string micros(const LatencySummary& s) {
  if (s.count == 0) return "-";
  return fmt::format("{:.1f}/{:.1f}/{:.1f}/{:.0f}", s.mean_ns / 1e3, s.p50_ns / 1e3, s.p99_ns / 1e3, s.max_ns / 1e3);
}

}  // namespace

std::string format_table(const std::vector<CudaReplayResult>& results) {
  std::string out;
  if (results.empty()) return out;
  out += fmt::format("GPU {} (cuda:{}), touch {}; latency in us: mean/p50/p99/max\n", results[0].gpu,
                     results[0].ordinal, results[0].touched ? "on" : "off");
  out += fmt::format("{:<40} {:>26} {:>26} {:>15} {:>15} {:>15} {:>15} {:>15} {:>15} {:>5}\n", "policy", "malloc us",
                     "free us", "reserved:driver", "counted", "simulated", "pool high", "free before", "free after",
                     "OOMs");
  for (const auto& r : results) {
    out += fmt::format("{:<40} {:>26} {:>26} {:>15} {:>15} {:>15} {:>15} {:>15} {:>15} {:>5}\n", r.policy,
                       micros(r.malloc_latency), micros(r.free_latency), r.driver.used_peak, r.counted.reserved.bytes,
                       r.simulated ? std::to_string(r.simulated->reserved.bytes) : "-",
                       r.pool_reserved_high ? std::to_string(*r.pool_reserved_high) : "-", r.free_before, r.free_after,
                       r.counted.ooms.size());
  }
  for (const auto& r : results) {
    if (!memory_returned(r))
      out += fmt::format("{}: free device memory did not return: {} bytes before, {} after ({:+} bytes)\n", r.policy,
                         r.free_before, r.free_after,
                         static_cast<int64_t>(r.free_after) - static_cast<int64_t>(r.free_before));
    if (r.held_at_end)
      out += fmt::format(
          "{}: the policy still held {} after freeing every block and empty_cache (released by the device)\n", r.policy,
          format_size(r.held_at_end));
    for (const auto& o : r.counted.ooms)
      out += fmt::format("{}: OUT OF MEMORY at event {}: {} requested with {} reserved\n", r.policy, o.event_index,
                         format_size(o.size), format_size(o.reserved));
  }
  return out;
}

}  // namespace fraglab::cuda
