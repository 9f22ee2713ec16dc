// ReplayResult as JSON, the one machine-readable form every command writes.
#pragma once

#include <nlohmann/json.hpp>

#include "sim/replay.h"

namespace fraglab {

nlohmann::json to_json(const Fragmentation& f);
nlohmann::json to_json(const ReplayResult& r);

}  // namespace fraglab
