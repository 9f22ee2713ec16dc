// The self-contained HTML page of `fraglab ranks --html`: per job, the ranks' table, every rank's timeline
// overlaid on the job's clock (live and recorded reserved bytes), where ranks diverge, the rank that reaches
// the limit first and what it holds beyond the lightest rank, and the one setting for every rank. The same
// style and SVG charts as `fraglab diagnose --html`.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "report/ranks.h"

namespace fraglab {

std::string ranks_html(const std::vector<std::pair<std::string, RanksReport>>& jobs, const std::string& command);

}  // namespace fraglab
