// The desktop window: GLFW + OpenGL 3 + Dear ImGui's backends around build_frame(), file
// drops, and the headless screenshot mode.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "traces/trace_io.h"

namespace fraglab::gui {

struct LaunchOptions {
  std::string trace;
  std::string second_trace;  // compared with the first (the compare view)
  // A job's rank snapshots by rank (fraglab-gui DIR or a_rank0 a_rank1 ...): the ranks view; `trace` is the
  // first rank's.
  std::vector<std::pair<int, std::string>> rank_set;
  std::vector<std::string> policies;
  std::string at;  // "peak" or an event index
  std::string view = "blockmap";
  std::string color = "size";
  std::string search;               // the events view's query
  std::string align = "time";       // two traces: time, step or events
  std::string capacity;             // device capacity, e.g. 80GiB; empty = unlimited
  std::vector<std::string> probes;  // PATH@BATCH snapshots of the program at smaller batches (the OOM view)
  int device = kAnyDevice;          // a snapshot's GPU (kAnyDevice: device 0, or the only one with data)
  std::string screenshot;           // write the window to this PNG once everything is shown, then exit
  std::string screenshot_numbers;   // with it, the numbers the views drew, as JSON (gui/model/shown_numbers.h)
  int width = 1600, height = 1000;
  double screenshot_timeout_s = 300;
};

// Runs the app; returns the process exit status (0, or 2 for bad input in screenshot mode).
int run_window(const LaunchOptions& options);

}  // namespace fraglab::gui
