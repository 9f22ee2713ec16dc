// The active memory view's model: every allocation of the trace as a band stacked over time
// (the picture PyTorch's MemoryViz calls "Active Memory Timeline"), with no cap on the
// number of allocations.
//
// At any event the live allocations stack in allocation order, oldest at the bottom, each
// as tall as its requested bytes; when one is freed the ones above it drop. A raster of the
// visible range is built off the UI thread, one pixel column at a time:
//  - each column shows the state at the event of its highest total (so no peak is lost
//    between columns, as the timeline's min/max pyramids do);
//  - level of detail: a band covering whole pixel rows fills them; bands thinner than a row
//    add their coverage-weighted color to it, so 100k tiny allocations make an honest mix
//    instead of vanishing, and the cost is O(live allocations + height) a column;
//  - the live set at a column comes from the nearest checkpoint (the live allocations every
//    K events, taken when the model is built) plus a forward sweep, so a zoomed-in raster
//    never sweeps the whole trace.
// Frames then draw one texture; zoom and pan draw the previous raster until the new one is
// there.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gui/model/series.h"
#include "gui/model/trace_info.h"

namespace fraglab::gui {

enum class BandColor { Size, Age, Site, Pool, Stream };  // as the app's ColorMode

// The live allocations (alloc event indices, oldest first) at any event.
class ActiveMemory {
 public:
  // `progress(done)` may cancel (return false: the model is left empty).
  explicit ActiveMemory(std::shared_ptr<const TraceInfo> trace, const std::function<bool(uint64_t)>& progress = {});

  const TraceInfo& trace() const { return *trace_; }
  const ByteSeries& total() const { return total_; }  // live requested bytes after each event
  const MinMaxPyramid& pyramid() const { return pyramid_; }
  // The live allocations just after `event`, oldest first.
  std::vector<uint64_t> live_at(uint64_t event) const;
  // The allocation whose band covers `bytes` above the bottom just after `event`, if any.
  std::optional<uint64_t> band_at(uint64_t event, uint64_t bytes) const;
  size_t checkpoints() const { return checkpoints_.size(); }

  // Forward sweep over events (used by the raster and by live_at).
  class Sweep {
   public:
    Sweep(const ActiveMemory& model, uint64_t event);  // state just after `event` (or before 0: kBefore)
    void advance_to(uint64_t event);                   // state just after `event` (>= the current)
    uint64_t live_bytes() const { return live_bytes_; }
    template <class F>
    void for_each_live(F&& f) const {
      for (uint64_t a : order_)
        if (a != kDead) f(a);
    }
    static constexpr uint64_t kBefore = UINT64_MAX;

   private:
    void apply(uint64_t index);
    const ActiveMemory& m_;
    uint64_t at_;                      // last applied event (kBefore: none)
    std::vector<uint64_t> order_;      // alloc indices, ascending, kDead where freed
    std::vector<uint32_t> pos_of_id_;  // allocation id -> position in order_
    size_t dead_ = 0;
    uint64_t live_bytes_ = 0;
    static constexpr uint64_t kDead = UINT64_MAX;
  };

 private:
  std::shared_ptr<const TraceInfo> trace_;
  ByteSeries total_;
  MinMaxPyramid pyramid_;
  uint64_t stride_ = 0;                             // events between checkpoints
  std::vector<std::vector<uint64_t>> checkpoints_;  // [k]: live just after event k * stride_ - 1 (k = 0: none)
};

struct RasterRequest {
  double begin = 0, end = 0;  // events [begin, end) across the width
  int width = 0, height = 0;
  BandColor color = BandColor::Size;
  int axis = 0;  // which mapping column_event is (event index or time), for comparing requests
  // Maps a column (0..width) to its first event; default: linear in events.
  std::function<uint64_t(double column)> column_event;
  bool operator==(const RasterRequest& o) const {
    return begin == o.begin && end == o.end && width == o.width && height == o.height && color == o.color &&
           axis == o.axis;
  }
};

struct MemoryRaster {
  RasterRequest request;
  uint64_t top_bytes = 1;              // bytes at the top row
  std::vector<uint32_t> rgba;          // width * height, top row first (palette.h packing)
  std::vector<uint64_t> column_event;  // the event each column shows
  std::vector<uint64_t> column_first;  // the first event each column covers
  // Where the picture draws event e, in columns (event_column_center over column_first).
  double column_of(uint64_t e) const;
  double seconds = 0;  // build time
};

// The color of one allocation's band (before its shading); age: when it was allocated.
uint32_t band_color(const TraceInfo& info, uint64_t alloc_index, BandColor mode);

MemoryRaster build_raster(
    const ActiveMemory& model, const RasterRequest& request,
    const std::function<bool()>& cancelled = [] { return false; });

// The model and its rasters on a worker thread (newest request wins).
class ActiveMemoryRun {
 public:
  ActiveMemoryRun(std::shared_ptr<const TraceInfo> trace, std::function<void()> notify = {});
  ~ActiveMemoryRun();
  ActiveMemoryRun(const ActiveMemoryRun&) = delete;
  ActiveMemoryRun& operator=(const ActiveMemoryRun&) = delete;

  double progress() const;  // of building the model
  const ActiveMemory* model() const { return ready_.load(std::memory_order_acquire) ? model_.get() : nullptr; }
  void request(RasterRequest r);
  std::shared_ptr<const MemoryRaster> raster() const;
  bool settled() const;  // the newest request's raster is there

 private:
  void work(std::stop_token stop);
  std::shared_ptr<const TraceInfo> trace_;
  std::function<void()> notify_;
  std::unique_ptr<ActiveMemory> model_;
  std::atomic<bool> ready_{false};
  std::atomic<uint64_t> done_{0};
  mutable std::mutex mutex_;
  std::condition_variable_any wake_;
  std::optional<RasterRequest> wanted_;
  uint64_t wanted_serial_ = 0, built_serial_ = 0;
  std::atomic<uint64_t> wanted_now_{0};
  std::shared_ptr<const MemoryRaster> raster_;
  std::jthread worker_;  // last: joins first
};

}  // namespace fraglab::gui
