// fraglab-gui: the desktop visualizer of block maps, fragmentation and reserved memory.
//   fraglab-gui [TRACE] [--policy P ...] [--at peak|EVENT] [--view NAME] [--color size|age|site]
//               [--screenshot out.png] [--width W --height H]
#include <CLI/CLI.hpp>

#include "allocators/plugin.h"
#include "gui/window.h"
#include "sim/pool_checker.h"
#include "traces/trace_io.h"

int main(int argc, char** argv) {
  fraglab::install_pool_checker();  // the pytorch model revises the pools a snapshot's importer guesses
  fraglab::gui::LaunchOptions o;
  CLI::App cli{"fraglab-gui: block maps, fragmentation and peak reserved memory of allocator policies"};
  cli.add_option("trace", o.trace, "Trace to open: " + fraglab::format_list());
  cli.add_option("-p,--policy", o.policies,
                 "Policy option string, as for `fraglab replay` (e.g. 'pytorch:expandable_segments:True'); repeat "
                 "to compare (default bestfit)")
      ->take_all();
  cli.add_option("--at", o.at, "Put the cursor at 'peak' (reserved memory of the first policy) or an event index");
  cli.add_option("--view", o.view, "View below the timeline")
      ->check(CLI::IsMember({"blockmap", "fragmentation", "timeline", "compare", "summary", "help"}));
  cli.add_option("--color", o.color, "Block colors")->check(CLI::IsMember({"size", "age", "site", "pool"}));
  cli.add_option("--capacity", o.capacity, "Simulated device capacity, e.g. 80GiB (default unlimited)");
  cli.add_option("--screenshot", o.screenshot,
                 "Render the window once the replays are done, write it to this PNG and exit (0, or 2 on bad input)");
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
  return fraglab::gui::run_window(o);
}
