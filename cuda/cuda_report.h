// CudaReplayResult as JSON and as the CLI's table.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cuda/cuda_replay.h"

namespace fraglab::cuda {

nlohmann::json to_json(const LatencySummary& s);
nlohmann::json to_json(const CudaReplayResult& r);
// One table: latency, reserved peaks (driver, policy's count, simulated), free memory.
std::string format_table(const std::vector<CudaReplayResult>& results);
// True when free device memory after the replay equals the value before it.
inline bool memory_returned(const CudaReplayResult& r) { return r.free_after == r.free_before; }

}  // namespace fraglab::cuda
