// How commands show who holds the live memory at a moment (report/program_attribution.h): diagnose at each
// OOM or peak, info --at. One JSON shape and one text layout for both.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/program_attribution.h"

namespace fraglab::cli {

nlohmann::json frames_json(const std::vector<StackFrame>& frames);
// Groups as JSON; `with_stack`: each group's library lines, categories and its largest block's stack.
nlohmann::json live_json(const std::vector<LiveShare>& shares, bool with_stack);
// The whole attribution: live_bytes, live_by (call_site|size_class), live_inferred_from, live_by_site,
// live_by_category, live_by_phase.
nlohmann::json attribution_json(const LiveAttribution& live);
void print_live_attribution(const LiveAttribution& live, size_t top, const std::string& indent);

}  // namespace fraglab::cli
