// The whole state of fraglab-gui in one place: what is loaded, which policies replay it,
// the cursor, what each view shows, and the caches views keep between frames. Views read
// and change it; only this file's functions start or stop work.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gui/model/block_strip.h"
#include "gui/model/policy_run.h"
#include "gui/model/recent_files.h"
#include "gui/model/trace_info.h"

namespace fraglab::gui {

// The tabs below the timeline; the fragmentation panel beside them is always shown.
enum class ViewId { BlockMap, Compare, Summary, Help };
constexpr const char* kViewNames[] = {"blockmap", "compare", "summary", "help"};
enum class ColorMode { Size, Age, Site, Pool };
constexpr const char* kColorNames[] = {"size", "age", "site", "pool"};
constexpr int kColorModes = static_cast<int>(std::size(kColorNames));
enum class TimeAxis { Events, Time };

// A block map laid out for one snapshot, size and color mode; rebuilt when any changes.
struct StripCache {
  std::shared_ptr<const CursorSnapshot> snap;
  int width = 0, rows = 0;
  ColorMode color = ColorMode::Size;
  BlockStrip strip;
};

struct TimelineState {
  double begin = 0, end = 0;  // visible events [begin, end); end <= begin: the whole trace
  TimeAxis axis = TimeAxis::Events;
  bool show[kSeriesCount] = {true, true, true};
};

class AppState {
 public:
  explicit AppState(std::function<void()> notify = {}, RecentFiles recent = RecentFiles());
  ~AppState();

  // --- what is loaded -------------------------------------------------------------
  void open(const std::string& path);  // asynchronous; errors land in load_error
  // Adopts a trace already in memory (benchmarks, tests).
  void adopt(std::shared_ptr<const TraceInfo> trace);
  // Called once a frame on the UI thread: picks up a finished load.
  void poll();
  bool loading() const { return loading_.load(); }
  const std::string& loading_path() const { return loading_path_; }

  std::shared_ptr<const TraceInfo> trace;
  std::string load_error;
  RecentFiles recent;
  std::string path_field;    // the "open" text field

  // --- policies -------------------------------------------------------------------
  std::vector<std::string> policies{"bestfit"};  // option strings, as on the command line
  // Put the recorded lane ("recorded") first for traces that record their layout (snapshots),
  // unless the policies were given on the command line.
  bool auto_recorded = true;
  std::vector<std::unique_ptr<PolicyRun>> runs;  // one a policy, for the loaded trace
  SimDeviceConfig device;
  std::string policy_field;
  void add_policy(const std::string& spec);
  void remove_policy(size_t index);
  size_t primary = 0;  // the run the timeline, block map and fragmentation views show
  const PolicyRun* primary_run() const { return primary < runs.size() ? runs[primary].get() : nullptr; }
  const RunResult* primary_result() const { return primary_run() ? primary_run()->result() : nullptr; }

  // --- cursor and navigation ------------------------------------------------------
  uint64_t cursor = 0;
  std::string pending_at;  // "peak" or an event index, applied once the primary replay is done
  void set_cursor(uint64_t event_index);
  void show(ViewId v) {
    view = v;
    view_changed = true;
  }
  void jump_to_peak();
  void jump_to_oom(int direction);           // the next (+1) or previous (-1) OOM of the primary policy
  void jump_to_device_grow(int direction);   // the next or previous segment allocation / page map
  // Every replay and the snapshots at the cursor are finished (headless screenshots).
  bool settled() const;

  // --- views ----------------------------------------------------------------------
  ViewId view = ViewId::BlockMap;
  ColorMode color = ColorMode::Size;
  TimelineState timeline;
  bool view_changed = true;  // select app.view's tab on the next frame (keyboard, command line)
  bool focus_path = false;
  struct DiffCache {
    std::vector<int32_t> kib;  // reserved(run) - reserved(baseline), KiB per event
    MinMaxPyramid pyramid;
  };
  std::map<std::pair<const PolicyRun*, const PolicyRun*>, DiffCache> diffs;  // (run, baseline)
  std::map<std::pair<const PolicyRun*, int>, StripCache> strips;  // (run, panel) -> layout

 private:
  void start_runs();
  void place_recorded_lane();
  bool recorded_added_ = false;  // place_recorded_lane put it there
  void apply_pending_at();

  std::function<void()> notify_;
  std::atomic<bool> loading_{false};
  std::string loading_path_;
  std::mutex load_mutex_;
  std::shared_ptr<const TraceInfo> loaded_;
  std::string loaded_error_;
  bool load_finished_ = false;
  std::jthread loader_;
};

}  // namespace fraglab::gui
