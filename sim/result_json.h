// ReplayResult as JSON, the one machine-readable form every command writes.
#pragma once

#include <nlohmann/json.hpp>

#include "sim/replay.h"

namespace fraglab {

nlohmann::json to_json(const Fragmentation& f);
// Call counts by kind, failed calls apart: the "device_calls" object of every command.
nlohmann::json to_json(const DeviceCallCounts& c);
nlohmann::json to_json(const ReplayResult& r);

}  // namespace fraglab
