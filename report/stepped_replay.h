// A replay that stops where the caller asks and shows the allocator's state there.
//
// `fraglab diagnose` needs "the state just before event i" (a recorded OOM, a peak) and to
// ask the policy there for a request the recording could not serve; tune's verdict search
// asks the same question under every candidate setting. Both drive the engine event by event
// through this class instead of ReplayEngine::run.
//
// The device chain is SimDevice <- StreamRecordingDevice <- TrackingDevice <- policy: the
// adaptor remembers which stream each segment and mapping was obtained for (the engine's
// TrackingDevice knows where memory is, not for whom), so free space can be split by stream.
#pragma once

#include <map>
#include <memory>
#include <optional>

#include "allocators/registry.h"
#include "device/forwarding_device.h"
#include "device/simulated_gpu.h"
#include "sim/replay.h"

namespace fraglab {

// A device adaptor that records the stream of every segment and page mapping, and the allocator pool
// of the request it was obtained for (set_pool before each request: the trace's Event::pool).
class StreamRecordingDevice final : public ForwardingDevice {
 public:
  explicit StreamRecordingDevice(Device& upstream) : ForwardingDevice(upstream) {}

 private:
  // The calls that obtain or give back memory (device/forwarding_device.h forwards the others).
  std::optional<Addr> do_allocate_segment(uint64_t size, StreamIndex stream) override;
  void do_free_segment(Addr addr, uint64_t size) override;
  bool do_map_pages(Addr addr, uint64_t size, StreamIndex stream) override;
  void do_unmap_pages(Addr addr, uint64_t size) override;

 public:
  // The stream memory at `addr` was obtained for (the first mapping's, for a virtual range), if any.
  std::optional<StreamIndex> stream_at(Addr addr) const;
  // The pool of the request memory at `addr` was obtained for (0: the default pools, or unknown).
  PoolIndex pool_at(Addr addr) const;
  void set_pool(PoolIndex pool) { pool_ = pool; }

 private:
  struct Piece {
    uint64_t size;
    StreamIndex stream;
    PoolIndex pool;
  };
  const Piece* piece_at(Addr addr) const;
  PoolIndex pool_ = 0;
  std::map<Addr, Piece> pieces_;  // segments and mapped runs, by start
};

// A request tried against the policy at a point of the replay (a recorded OOM's).
struct Probe {
  uint64_t event_index = 0;  // tried just before this event
  uint64_t size = 0;
  StreamIndex stream = 0;
};

class SteppedReplay {
 public:
  SteppedReplay(const Trace& trace, const PolicySpec& spec, std::optional<uint64_t> capacity);

  // Applies the events before `index` not applied yet. False when the trace ends first.
  bool advance_to(uint64_t index);
  // Asks the policy for the request now and gives the block straight back: would it have
  // been served? (The block, if any, goes back to the policy's cache as a free would.)
  bool probe(const Probe& request);
  void finish() { advance_to(trace_.events.size()); }

  uint64_t position() const { return position_; }
  const ReplayEngine& engine() const { return *engine_; }
  const TrackingDevice& device() const { return tracking_; }
  const StreamRecordingDevice& streams() const { return streams_; }
  const Trace& trace() const { return trace_; }
  ReplayResult take_result() { return engine_->take_result(); }
  // The live block `id` was freed by the program (free_requested) and awaits the streams that used it
  // (its free_completed is still to come): PyTorch counts it out of allocated_bytes.
  bool awaiting_streams(AllocId id) const { return id < awaiting_.size() && awaiting_[id]; }

 private:
  const Trace& trace_;
  SimulatedGpu sim_;
  StreamRecordingDevice streams_;
  TrackingDevice tracking_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<ReplayEngine> engine_;
  void note_awaiting(const Event& e);

  uint64_t position_ = 0;
  std::vector<uint8_t> awaiting_;  // by id: free requested, not completed
};

}  // namespace fraglab
