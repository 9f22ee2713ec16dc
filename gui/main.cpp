// fraglab-gui: the desktop visualizer of block maps, fragmentation and reserved memory.
//   fraglab-gui [TRACE [TRACE_B] | RANKS_DIR | A_rank0 A_rank1 ...] [--policy P ...] [--at peak|EVENT] [--view NAME]
//   [--color size|age|site|pool|stream|category]
//               [--gpu N] [--screenshot out.png] [--width W --height H]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

#include "allocators/plugin.h"
#include "gui/model/oom_diagnosis.h"
#include "gui/model/ranks_run.h"
#include "gui/view_table.h"
#include "gui/window.h"
#include "traces/trace_io.h"

int main(int argc, char** argv) {
  fraglab::gui::LaunchOptions o;
  CLI::App cli{"fraglab-gui: block maps, fragmentation and peak reserved memory of allocator policies"};
  std::vector<std::string> traces;
  cli.add_option("traces", traces,
                 "Trace to open: " + fraglab::format_list() +
                     "; a second one is compared with it (compare view); a directory of one job's per-rank snapshots, "
                     "or two or more files named rankN of one job, open as a rank set (ranks view)")
      ->expected(0, -1);
  cli.add_option("-p,--policy", o.policies,
                 "Policy option string, as for `fraglab replay` (e.g. 'pytorch:expandable_segments:True'), or "
                 "'recorded' (the recording itself: its own blocks and segments); repeat to compare (default: recorded "
                 "for snapshots, then bestfit)")
      ->take_all();
  cli.add_option(
      "--at", o.at,
      "Put the cursor at 'peak' (reserved memory of the first policy), 'oom' (its first OOM) or an event index");
  std::vector<std::string> views(fraglab::gui::kAlwaysShown.begin(), fraglab::gui::kAlwaysShown.end());
  std::string view_help = "View below the timeline:";
  for (const auto& v : fraglab::gui::kViews) {
    views.emplace_back(v.flag);
    view_help += std::string(" ") + v.flag;
  }
  cli.add_option("--view", o.view, view_help)->check(CLI::IsMember(views));
  cli.add_option("--color", o.color, "Block and band colors")
      ->check(CLI::IsMember(
          std::vector<std::string>(std::begin(fraglab::gui::kColorNames), std::end(fraglab::gui::kColorNames))));
  cli.add_option("--search", o.search, "Events view: search for this (0xADDR, size:A..B, action:NAME, frame text)");
  cli.add_option("--align", o.align, "Two traces: align the second's timeline by time, step or events")
      ->check(CLI::IsMember({"time", "step", "events"}));
  cli.add_option(
      "--capacity", o.capacity,
      "Simulated device capacity, e.g. 80GiB (default: the limit a recording's OOMs show, as `fraglab replay` infers it; else unlimited)");
  cli.add_option("--gpu,--trace-device", o.device,
                 "The GPU whose history to show from a snapshot of several (default: device 0, or the only one "
                 "with data; the toolbar's GPU field switches in the app); as `fraglab --gpu`")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--probe", o.probes,
                 "A snapshot of the program at a smaller batch, PATH@BATCH (two or more): the OOM view names the "
                 "largest batch that fits (fraglab fit)");
  cli.add_option("--screenshot", o.screenshot,
                 "Render the window once the replays are done, write it to this PNG and exit (0, or 2 on bad input)");
  cli.add_option("--screenshot-numbers", o.screenshot_numbers,
                 "With --screenshot: write the numbers the views drew to this JSON file (keys VIEW.QUANTITY, bytes)")
      ->needs("--screenshot");
  cli.add_option("--screenshot-timeout", o.screenshot_timeout_s, "Give up on a screenshot after this many seconds");
  cli.add_option("--width", o.width, "Window width")->check(CLI::Range(320, 8192));
  cli.add_option("--height", o.height, "Window height")->check(CLI::Range(240, 8192));
  std::vector<std::string> plugins;
  cli.add_option("--plugin", plugins, "A shared library of policies built against the fraglab package (repeatable)")
      ->each([](const std::string& path) {
        try {
          fraglab::load_policy_plugin(path);
        } catch (const fraglab::PolicyConfigError& e) {
          throw CLI::ValidationError(e.what());
        }
      });
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  try {
    o.rank_set = fraglab::gui::rank_set_of(traces);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fraglab-gui: %s\n", e.what());
    return 2;
  }
  if (!o.rank_set.empty()) {
    o.trace = o.rank_set.front().second;
  } else {
    if (traces.size() > 2) {
      std::fprintf(stderr, "fraglab-gui: at most two traces (or one job's rank snapshots, named rankN)\n");
      return 2;
    }
    if (!traces.empty()) o.trace = traces[0];
    if (traces.size() > 1) o.second_trace = traces[1];
  }
  int status = fraglab::gui::run_window(o);
  if (fraglab::gui::OomDiagnosisRun::any_running()) {  // a detached diagnosis would outlive the statics
    std::fflush(nullptr);
    std::_Exit(status);
  }
  return status;
}
