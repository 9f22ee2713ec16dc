// Output options shared by compare and merge (and their files, report/report_output.h).
#pragma once

#include <CLI/CLI.hpp>

#include "report/report_output.h"

namespace fraglab::cli {

// -o DIR / --csv / --json / --timings / --html / --md
void add_report_outputs(CLI::App* cmd, ReportPaths& out);

}  // namespace fraglab::cli
