#include "report/report_output.h"

#include <filesystem>
#include <memory>
#include <vector>

#include "report/compare_report.h"
#include "report/compare_stats.h"
#include "traces/atomic_file.h"

namespace fraglab {

std::string write_reports(const CompareResults& results, const ReportPaths& given, const std::string& command) {
  ReportPaths paths = given;
  if (!paths.dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(paths.dir, ec);
    if (ec) throw std::runtime_error("cannot create directory " + paths.dir + ": " + ec.message());
    auto under = [&](std::string& p, const char* name) {
      if (p.empty()) p = (std::filesystem::path(paths.dir) / name).string();
    };
    under(paths.csv, "results.csv");
    under(paths.json, "results.json");
    under(paths.timings, "timings.json");
    under(paths.html, "report.html");
    under(paths.md, "summary.md");
  }
  CompareSummary summary = summarize(results);
  std::string md = markdown_report(results, summary, command);
  std::vector<std::unique_ptr<AtomicFile>> files;
  auto emit = [&](const std::string& path, const std::string& text) {
    if (path.empty()) return;
    files.push_back(std::make_unique<AtomicFile>(path));
    files.back()->write(text);
  };
  emit(paths.csv, results_csv(results));
  emit(paths.json, results_json(results));
  emit(paths.timings, timings_json(results));
  emit(paths.html, html_report(results, summary, command));
  emit(paths.md, md);
  for (auto& f : files) f->commit();
  return md;
}

}  // namespace fraglab
