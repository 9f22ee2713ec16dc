// PolicyRun: one policy replayed over the loaded trace, off the UI thread.
//
// A replay worker runs the whole trace once and records the per-event byte series (and
// their min/max pyramids), peaks, OOMs and the events where the policy took new device
// memory. A snapshot worker answers "what does memory look like at event i?": it replays
// to the cursor again (the engine's stop_before), copies the live blocks and device
// regions, measures fragmentation and probes the largest request the policy would serve
// without new memory. Re-replaying beats keeping checkpoints here: policies hold no
// copyable state, and replay runs at millions of events a second, so a cursor move on the
// bundled traces costs milliseconds; a newer cursor request cancels an older replay.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gui/model/series.h"
#include "gui/model/trace_info.h"
#include "sim/replay.h"

namespace fraglab::gui {

enum class Series { Requested = 0, Allocated = 1, Reserved = 2 };
constexpr int kSeriesCount = 3;

struct RunResult {
  ReplayResult replay;
  ByteSeries series[kSeriesCount];
  MinMaxPyramid pyramid[kSeriesCount];
  std::vector<uint64_t> device_grows;  // event indices where segments were allocated or pages mapped
};

struct SnapshotBlock {
  Addr addr = 0;
  uint64_t size = 0, requested = 0, alloc_index = 0;
  StreamIndex stream = 0;
  // The recorded lane: freed by the program, held until the streams that used it are done (PyTorch counts
  // it out of allocated_bytes). Policy lanes hold a block until its free completes and never set this.
  bool awaiting_streams = false;
};

struct CursorSnapshot {
  uint64_t event_index = 0;                         // memory after events [0, event_index]
  std::vector<SnapshotBlock> blocks;                // live blocks, address order
  uint64_t awaiting_streams = 0;                    // bytes of blocks awaiting streams (SnapshotBlock)
  std::vector<DeviceRegion> regions;                // segments and reserved VMM ranges, address order
  std::vector<PoolIndex> region_pools;              // the recorded lane: each region's private pool (0: default)
  std::vector<std::pair<Addr, uint64_t>> physical;  // backed intervals, address order
  Fragmentation frag;
  std::vector<uint64_t> free_ranges;  // free range sizes, address order
  // The largest request the policy serves right now without taking more device memory,
  // found by trying requests on fresh replays to this event. Unset when not probed.
  std::optional<uint64_t> largest_fit;
  bool probed = false;     // the probe finished (or was skipped)
  std::string probe_note;  // why it was skipped
};

class PolicyRun {
 public:
  enum class State { Running, Done, Failed };

  // `notify` is called from worker threads when something new can be shown.
  PolicyRun(std::shared_ptr<const TraceInfo> trace, std::string spec, SimDeviceConfig device,
            std::function<void()> notify = {});
  ~PolicyRun();
  PolicyRun(const PolicyRun&) = delete;
  PolicyRun& operator=(const PolicyRun&) = delete;

  const std::string& spec() const { return spec_; }
  State state() const { return state_.load(std::memory_order_acquire); }
  double progress() const;                             // 0..1 of the whole-trace replay
  const std::string& error() const { return error_; }  // when Failed
  const RunResult* result() const;                     // when Done

  // Asks for the memory at `event_index` (asynchronously; a newer request wins).
  void request_snapshot(uint64_t event_index);
  std::shared_ptr<const CursorSnapshot> snapshot() const;
  // The snapshot for `event_index` is built and probed, or cannot be (the run failed).
  bool settled_at(uint64_t event_index) const;

  // Synchronous snapshot (tests, benchmarks); throws like the replay.
  static CursorSnapshot build_snapshot(
      const TraceInfo& trace, const std::string& spec, const SimDeviceConfig& device, uint64_t event_index, bool probe,
      const std::function<bool()>& cancelled = [] { return false; });

 private:
  void replay_all(std::stop_token stop);
  void serve_snapshots(std::stop_token stop);
  void changed() const {
    if (notify_) notify_();
  }

  std::shared_ptr<const TraceInfo> trace_;
  std::string spec_;
  SimDeviceConfig device_;
  std::function<void()> notify_;

  std::atomic<State> state_{State::Running};
  std::atomic<uint64_t> done_events_{0};
  std::string error_;
  std::unique_ptr<RunResult> result_;

  mutable std::mutex mutex_;
  std::condition_variable_any wake_;
  uint64_t wanted_ = UINT64_MAX;  // cursor asked for; UINT64_MAX = none
  std::atomic<uint64_t> wanted_now_{UINT64_MAX};
  std::shared_ptr<const CursorSnapshot> snapshot_;
  std::string snapshot_error_;

  // Last members: they join before the rest is destroyed.
  std::jthread replay_worker_, snapshot_worker_;
};

}  // namespace fraglab::gui
