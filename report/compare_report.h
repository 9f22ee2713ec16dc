// The human-readable forms of a corpus run: a self-contained HTML report (inline CSS and
// SVG, nothing fetched) and a Markdown summary for READMEs and pull requests.
#pragma once

#include <string>

#include "report/compare_results.h"
#include "report/compare_stats.h"

namespace fraglab {

// `command` is shown at the top (how to regenerate the report).
std::string html_report(const CompareResults& results, const CompareSummary& summary, const std::string& command);
std::string markdown_report(const CompareResults& results, const CompareSummary& summary, const std::string& command);

}  // namespace fraglab
