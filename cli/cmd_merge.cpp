// fraglab merge SHARD_RESULTS... [-o DIR]: combines the results.json of the shards of a
// compare run (--shard K/N) into the whole run's CSV, JSON and reports, byte-identical
// in CSV and JSON to running the matrix in one process.
#include <fmt/core.h>

#include <filesystem>

#include "cli/commands.h"
#include "cli/report_options.h"
#include "report/compare_results.h"
#include "report/report_output.h"

namespace fraglab::cli {

namespace {

struct MergeArgs {
  std::vector<std::string> inputs;
  ReportPaths out;
};

int run_merge(const MergeArgs& a) {
  namespace fs = std::filesystem;
  std::vector<std::string> jsons;
  for (const auto& in : a.inputs)
    jsons.push_back((fs::is_directory(in) ? fs::path(in) / "results.json" : fs::path(in)).string());
  // No output may be a shard's results (or its timings, which are read beside it).
  std::vector<std::string> read = jsons;
  for (const auto& json : jsons) read.push_back((fs::path(json).parent_path() / "timings.json").string());
  for (const auto& [option, path] : {std::pair<const char*, const std::string*>{"--csv", &a.out.csv},
                                     {"--json", &a.out.json},
                                     {"--timings", &a.out.timings},
                                     {"--html", &a.out.html},
                                     {"--md", &a.out.md}})
    refuse_output_over_input(read, option, *path);
  if (!a.out.dir.empty())
    for (const char* name : {"results.csv", "results.json", "timings.json", "report.html", "summary.md"})
      refuse_output_over_input(read, "-o", a.out.dir + "/" + name);
  std::vector<CompareResults> shards;
  std::string command = "fraglab merge";
  for (size_t i = 0; i < jsons.size(); ++i) {
    const fs::path json = jsons[i];
    shards.push_back(read_results(json.string(), (json.parent_path() / "timings.json").string()));
    command += " " + a.inputs[i];
  }
  if (!a.out.dir.empty()) command += " -o " + a.out.dir;
  CompareResults merged = merge_results(std::move(shards), a.inputs);
  std::string md = write_reports(merged, a.out, command);
  if (!a.out.any())
    fmt::print("{}", md);
  else
    fmt::print("merged {} shards: {} traces x {} policies\n", a.inputs.size(), merged.traces.size(),
               merged.policies.size());
  return 0;
}

}  // namespace

void add_merge(CLI::App& app, CommandFn& run) {
  static MergeArgs a;
  auto* cmd = app.add_subcommand("merge", "Combine the shard results of fraglab compare --shard K/N");
  cmd->add_option("shards", a.inputs, "Shard results: results.json files or the directories holding them")->required();
  add_report_outputs(cmd, a.out);
  cmd->callback([&run] { run = [] { return run_merge(a); }; });
}

}  // namespace fraglab::cli
