// Writing a corpus run's files: results.csv, results.json, timings.json, report.html,
// summary.md. All are written through AtomicFile and committed together at the end, so
// a failure leaves no half-written set that looks complete.
#pragma once

#include <string>

#include "report/compare_results.h"

namespace fraglab {

struct ReportPaths {
  std::string dir;  // -o DIR: every file under its default name unless named below
  std::string csv, json, timings, html, md;
  bool any() const {
    return !dir.empty() || !csv.empty() || !json.empty() || !timings.empty() || !html.empty() || !md.empty();
  }
};

// Writes the files `paths` asks for; `command` is quoted in the reports. Returns the Markdown summary.
std::string write_reports(const CompareResults& results, const ReportPaths& paths, const std::string& command);

}  // namespace fraglab
