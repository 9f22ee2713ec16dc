// The whole state of fraglab-gui in one place: what is loaded, which policies replay it,
// the cursor, what each view shows, and the caches views keep between frames. Views read
// and change it; only this file's functions start or stop work.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gui/model/active_memory.h"
#include "gui/model/block_strip.h"
#include "gui/model/event_search.h"
#include "gui/model/key_queue.h"
#include "gui/model/oom_diagnosis.h"
#include "gui/model/policy_run.h"
#include "gui/model/ranks_run.h"
#include "gui/model/recent_files.h"
#include "gui/model/segment_timeline.h"
#include "gui/model/shown_numbers.h"
#include "gui/model/trace_info.h"
#include "gui/model/trace_pair.h"

namespace fraglab::gui {

// The tabs below the timeline, in tab order; the fragmentation panel beside them is always
// shown. Names, keys, titles and help of each are one row of gui/view_table.h.
enum class ViewId { BlockMap, Memory, Events, Oom, Compare, Ranks, Summary, Help, Settings, Pools, Segments };
enum class ColorMode { Size, Age, Site, Pool, Stream, Category };
constexpr const char* kColorNames[] = {"size", "age", "site", "pool", "stream", "category"};
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
  // The PyTorch model checks the loaded snapshot's pools on the loader thread (load_trace_info).
  bool checking_pools() const { return pool_check_running_.load(); }
  const std::string& loading_path() const { return loading_path_; }

  std::shared_ptr<const TraceInfo> trace;
  std::string load_error;
  RecentFiles recent;
  std::string path_field;  // the "open" text field

  // --- a second trace (fraglab-gui A B), compared with the first in the compare view ---
  void open_second(const std::string& path);  // asynchronous, like open()
  std::string second_path;
  std::shared_ptr<const TraceInfo> other;
  std::string other_error;
  std::unique_ptr<PolicyRun> other_run;  // the primary policy on the second trace
  std::unique_ptr<TracePairRun> pair;    // fraglab diff's comparison and the step boundaries
  Align align = Align::Time;

  // --- a set of rank snapshots (fraglab-gui DIR, or a_rank0 a_rank1 ...): the ranks view (view_ranks.cpp) ---
  // Every rank read together on a worker; the other views show one rank's snapshot (rank_shown), which the
  // ranks view's selector switches.
  std::unique_ptr<RanksRun> ranks;
  int rank_shown = -1;

  // --- policies -------------------------------------------------------------------
  std::vector<std::string> policies{"bestfit"};  // option strings, as on the command line
  // Put the recorded lane ("recorded") first for traces that record their layout (snapshots),
  // unless the policies were given on the command line.
  bool auto_recorded = true;
  std::vector<std::unique_ptr<PolicyRun>> runs;  // one a policy, for the loaded trace
  // Segments as `fraglab replay` places them by default: the recording's own addresses for the pytorch
  // policy at its recorded settings, the CUDA driver's model for the rest (sim/replay_simulated.h).
  SimDeviceConfig device = auto_addresses();
  static SimDeviceConfig auto_addresses() {
    SimDeviceConfig d;
    d.addresses = AddressModel::Auto;
    return d;
  }
  // The device a policy replays `t` on: `device`, its capacity the one the recording's OOMs show where
  // --capacity gives none (TraceInfo::inferred_capacity), as `fraglab replay` does.
  SimDeviceConfig device_for(const TraceInfo& t) const {
    SimDeviceConfig d = device;
    if (!d.capacity) d.capacity = t.inferred_capacity;
    return d;
  }
  // The GPU whose history a multi-GPU snapshot is read for (--device; kAnyDevice: device 0, or the only
  // one with data). Set before the first open; loader threads read it.
  int trace_device = kAnyDevice;
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
  void jump_to_oom(int direction);          // the next (+1) or previous (-1) OOM of the primary policy
  void jump_to_device_grow(int direction);  // the next or previous segment allocation / page map
  // Every replay and the snapshots at the cursor are finished (headless screenshots).
  bool settled() const;
  // Starts the workers a view needs (the command line's --view before any frame).
  void prepare_view(ViewId v);

  // --- views ----------------------------------------------------------------------
  ViewId view = ViewId::BlockMap;
  ColorMode color = ColorMode::Size;
  TimelineState timeline;
  bool view_changed = true;  // select app.view's tab on the next frame (keyboard, command line)
  bool focus_path = false;
  KeyQueue keys;                  // presses since the last frame (the window's GLFW callbacks queue them)
  std::u32string typed_for_path;  // typed after a Ctrl+L, before the path field had the keyboard
  // The numbers this frame drew (a screenshot's --screenshot-numbers): views that only read the state
  // record them too, hence mutable.
  mutable ShownNumbers shown;
  struct DiffCache {
    std::vector<int32_t> kib;  // reserved(run) - reserved(baseline), KiB per event
    MinMaxPyramid pyramid;
  };
  std::map<std::pair<const PolicyRun*, const PolicyRun*>, DiffCache> diffs;  // (run, baseline)
  std::map<std::pair<const PolicyRun*, int>, StripCache> strips;             // (run, panel) -> layout

  // Active memory view: the model is built on a worker the first time the view is shown.
  std::unique_ptr<ActiveMemoryRun> memory;
  ActiveMemoryRun& memory_run();
  // Uploads a raster as a texture (replacing `old`, 0 for none) and returns its id; set by
  // the window (OpenGL). Without it (benchmarks) the view draws no picture.
  std::function<uint64_t(const MemoryRaster&, uint64_t old)> upload_texture;
  struct MemoryTexture {
    std::shared_ptr<const MemoryRaster> raster;
    uint64_t id = 0;
  } memory_texture;

  // Event list view.
  struct EventsState {
    std::string query;
    std::string error;              // the query's, when malformed
    std::vector<uint64_t> matches;  // event indices, ascending
    bool searched = false, only_matches = false;
    uint64_t scrolled_to = UINT64_MAX;  // the cursor the list last scrolled to
  } events;
  void search_events(const std::string& query);
  void step_match(int direction);  // the cursor to the next / previous match

  // Cached-segment timeline (view_segments.cpp): the trace's segment spans, and the picture of the
  // visible range at the view's size (rebuilt when either changes), uploaded as a texture.
  struct SegmentsState {
    const TraceInfo* trace = nullptr;  // the spans' (a new trace rebuilds them)
    std::vector<SegmentSpan> spans;
    SegmentRaster raster;
    double begin = -1, end = -1;
    int axis = -1;
    uint64_t texture = 0;
  } segments;

  // OOM view: diagnose's reading at each OOM, on a worker once the view is shown.
  std::unique_ptr<OomDiagnosisRun> oom;
  std::vector<std::string> probes;  // --probe PATH@BATCH: the OOM view's batch what-if
  OomDiagnosisRun& oom_run();

 private:
  void start_runs();
  void place_recorded_lane();
  void start_pair();             // the second trace's run and the diff, once both traces are there
  bool recorded_added_ = false;  // place_recorded_lane put it there
  void apply_pending_at();
  // Hands a finished read to poll(); `revision`: the trace replaces one whose pools the model revised;
  // `check`: the pools' check follows on the loader thread.
  void publish_load(std::shared_ptr<const TraceInfo> info, std::string error, bool revision, bool check);

  std::function<void()> notify_;
  std::atomic<bool> loading_{false};
  std::string loading_path_;
  std::mutex load_mutex_;
  std::shared_ptr<const TraceInfo> loaded_;
  std::string loaded_error_;
  bool load_finished_ = false;
  bool loaded_revision_ = false;
  std::string reopen_at_;  // pending_at when the trace was opened
  std::atomic<bool> pool_check_running_{false};
  std::shared_ptr<const TraceInfo> other_loaded_;
  std::string other_loaded_error_;
  bool other_finished_ = false;
  std::jthread loader_, other_loader_;
};

}  // namespace fraglab::gui
