#include "gui/model/policy_run.h"

#include <algorithm>

#include "allocators/registry.h"
#include "device/limiting_device.h"
#include "device/simulated_gpu.h"
#include "gui/model/free_space.h"
#include "gui/model/recorded_run.h"
#include "sim/replay_simulated.h"

namespace fraglab::gui {

namespace {

// A policy on a simulated device behind a cap and the engine's tracking adaptor.
struct Replayer {
  SimulatedGpu gpu;
  LimitingDevice capped{gpu};  // the cap set at run time, over the card's capacity
  TrackingDevice tracking{capped};
  std::unique_ptr<Policy> policy;
  ReplayEngine engine;

  Replayer(const TraceInfo& info, const PolicySpec& spec, const SimDeviceConfig& config, ReplayOptions options)
      // Segments placed as the whole-trace replay places them (replay_simulated), so both agree at every event.
      : gpu(with_addresses_for(config, spec, info.trace.meta, &info.trace.events), &info.trace.events,
            &info.trace.meta.initial),
        policy(make_policy(spec, tracking, info.trace.meta, &info.trace.events)),
        engine(*policy, tracking, std::move(options)) {
    let_policy_enforce(*policy, gpu.limiter());
  }
};

ReplayOptions cursor_options(uint64_t event_index, const std::function<bool()>& cancelled) {
  ReplayOptions options;
  options.on_oom = OnOom::Skip;  // as the whole-trace replay does, so both agree at every event
  options.stop_before = event_index + 1;
  options.progress = [&cancelled](uint64_t) { return !cancelled(); };
  return options;
}

// Would the policy, at `event_index`, serve `size` bytes without more device memory?
bool serves_within_reserved(const TraceInfo& info, const PolicySpec& spec, const SimDeviceConfig& config,
                            uint64_t event_index, uint64_t size, const std::function<bool()>& cancelled) {
  Replayer r(info, spec, config, cursor_options(event_index, cancelled));
  MemorySource source(info.trace);
  r.engine.run(source);
  r.capped.set_limit(r.tracking.reserved_bytes());
  auto id = static_cast<AllocId>(r.engine.blocks().size());  // a slot no live allocation uses
  r.engine.settle_peak();
  auto block = r.policy->allocate(AllocRequest{id, size, 0, event_index + 1});
  return block.has_value();
}

// Binary search over request sizes, to 1/256 of the answer (each step is a replay).
// It assumes that a policy serving n bytes also serves fewer, as every size-indexed
// free list does.
void probe_largest_fit(const TraceInfo& info, const PolicySpec& spec, const SimDeviceConfig& config,
                       CursorSnapshot& snap, const std::function<bool()>& cancelled) {
  constexpr uint64_t kMaxProbeEvents = 4'000'000;  // beyond this a probe takes seconds
  const PolicyInfo* policy = find_policy(spec.name);
  snap.probed = true;
  if (policy && policy->needs_whole_trace) {
    snap.probe_note = "not probed: the policy plans with the whole trace";
    return;
  }
  if (snap.event_index > kMaxProbeEvents) {
    snap.probe_note = "not probed: too many events before the cursor";
    return;
  }
  uint64_t lo = 0, hi = snap.frag.free_bytes;  // recovery may merge free pieces, never exceed free bytes
  // Most policies serve exactly their largest hole: try it first, so the answer is exact then.
  if (uint64_t hole = snap.frag.largest_free; hole > 0) {
    if (serves_within_reserved(info, spec, config, snap.event_index, hole, cancelled)) {
      lo = hole;
    } else {
      hi = hole - 1;
    }
  }
  while (hi > lo && hi - lo > std::max<uint64_t>(512, lo / 256)) {
    if (cancelled()) {
      snap.probed = false;
      return;
    }
    uint64_t mid = lo + (hi - lo + 1) / 2;
    if (serves_within_reserved(info, spec, config, snap.event_index, mid, cancelled)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  if (hi > lo && serves_within_reserved(info, spec, config, snap.event_index, hi, cancelled)) lo = hi;
  snap.largest_fit = lo;
}

}  // namespace

PolicyRun::PolicyRun(std::shared_ptr<const TraceInfo> trace, std::string spec, SimDeviceConfig device,
                     std::function<void()> notify)
    : trace_(std::move(trace)), spec_(std::move(spec)), device_(device), notify_(std::move(notify)) {
  replay_worker_ = std::jthread([this](std::stop_token stop) { replay_all(stop); });
  snapshot_worker_ = std::jthread([this](std::stop_token stop) { serve_snapshots(stop); });
}

PolicyRun::~PolicyRun() {
  replay_worker_.request_stop();
  snapshot_worker_.request_stop();
  wake_.notify_all();
}

double PolicyRun::progress() const {
  if (state() != State::Running) return 1.0;
  uint64_t n = trace_->events();
  return n ? static_cast<double>(done_events_.load()) / static_cast<double>(n) : 1.0;
}

const RunResult* PolicyRun::result() const { return state() == State::Done ? result_.get() : nullptr; }

void PolicyRun::replay_all(std::stop_token stop) {
  try {
    if (is_recorded_spec(spec_)) {
      auto result = recorded_result(*trace_, [&](uint64_t done) {
        done_events_ = done;
        changed();
        return !stop.stop_requested();
      });
      if (!result) return;
      result_ = std::move(result);
      state_.store(State::Done, std::memory_order_release);
      changed();
      return;
    }
    auto result = std::make_unique<RunResult>();
    uint64_t n = trace_->events();
    for (auto& s : result->series) s.reserve(n);
    ReplayOptions options;
    options.on_oom = OnOom::Skip;  // replay the whole trace; OOMs are listed and marked
    options.on_event = [&](const TimelinePoint& p) {
      result->series[0].set(p.event_index, p.requested);
      result->series[1].set(p.event_index, p.allocated);
      result->series[2].set(p.event_index, p.reserved);
    };
    options.progress = [&](uint64_t done) {
      done_events_ = done;
      changed();
      return !stop.stop_requested();
    };
    MemorySource source(trace_->trace);
    std::vector<DeviceCall> calls;
    result->replay =
        replay_simulated(source, PolicySpec::parse(spec_), device_, options, &trace_->trace.events, &calls);
    if (result->replay.cancelled) return;
    for (int k = 0; k < kSeriesCount; ++k) {
      result->series[k].finish(n);
      result->pyramid[k] = MinMaxPyramid(result->series[k].kib());
    }
    for (const DeviceCall& call : calls) {
      bool grows = call.kind == EventKind::SegmentAlloc || call.kind == EventKind::SegmentMap;
      if (grows && (result->device_grows.empty() || result->device_grows.back() != call.event_index))
        result->device_grows.push_back(call.event_index);
    }
    result_ = std::move(result);
    state_.store(State::Done, std::memory_order_release);
  } catch (const std::exception& e) {
    error_ = e.what();
    state_.store(State::Failed, std::memory_order_release);
  }
  changed();
}

CursorSnapshot PolicyRun::build_snapshot(const TraceInfo& trace, const std::string& spec_text,
                                         const SimDeviceConfig& device, uint64_t event_index, bool probe,
                                         const std::function<bool()>& cancelled) {
  if (is_recorded_spec(spec_text)) return recorded_snapshot(trace, event_index, cancelled);
  PolicySpec spec = PolicySpec::parse(spec_text);
  Replayer r(trace, spec, device, cursor_options(event_index, cancelled));
  MemorySource source(trace.trace);
  r.engine.run(source);
  CursorSnapshot snap;
  snap.event_index = event_index;
  for (const BlockRecord& b : r.engine.blocks())
    if (b.live) snap.blocks.push_back({b.addr, b.size, b.requested, b.alloc_index, b.stream});
  std::sort(snap.blocks.begin(), snap.blocks.end(),
            [](const SnapshotBlock& a, const SnapshotBlock& b) { return a.addr < b.addr; });
  snap.regions = r.tracking.regions();
  snap.physical.assign(r.tracking.physical().begin(), r.tracking.physical().end());
  FreeSpace free = free_space(snap);  // as every view measures it (gui/model/free_space.h)
  snap.frag = free.frag;
  snap.free_ranges = std::move(free.sizes);
  if (probe) probe_largest_fit(trace, spec, device, snap, cancelled);
  return snap;
}

void PolicyRun::request_snapshot(uint64_t event_index) {
  {
    std::lock_guard lock(mutex_);
    if (wanted_ == event_index) return;
    wanted_ = event_index;
  }
  wanted_now_ = event_index;
  wake_.notify_all();
}

std::shared_ptr<const CursorSnapshot> PolicyRun::snapshot() const {
  std::lock_guard lock(mutex_);
  return snapshot_;
}

bool PolicyRun::settled_at(uint64_t event_index) const {
  if (state() == State::Failed) return true;
  std::lock_guard lock(mutex_);
  return (snapshot_ && snapshot_->event_index == event_index && snapshot_->probed) || !snapshot_error_.empty();
}

void PolicyRun::serve_snapshots(std::stop_token stop) {
  uint64_t built = UINT64_MAX;
  while (!stop.stop_requested()) {
    uint64_t want;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, stop, [&] { return wanted_ != UINT64_MAX && wanted_ != built; });
      if (stop.stop_requested()) return;
      want = wanted_;
    }
    auto stale = [&] { return stop.stop_requested() || wanted_now_.load() != want; };
    try {
      // Publish the memory first and the probe when it is done: the map shows at once.
      auto snap = std::make_shared<CursorSnapshot>(build_snapshot(*trace_, spec_, device_, want, false, stale));
      if (stale()) continue;
      {
        std::lock_guard lock(mutex_);
        snapshot_ = snap;
      }
      changed();
      if (snap->probed) {  // nothing to probe (the recorded lane)
        built = want;
        changed();
        continue;
      }
      auto probed = std::make_shared<CursorSnapshot>(*snap);
      probe_largest_fit(*trace_, PolicySpec::parse(spec_), device_, *probed, stale);
      if (stale()) continue;
      {
        std::lock_guard lock(mutex_);
        snapshot_ = probed;
      }
      built = want;
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex_);
      snapshot_error_ = e.what();
      built = want;
    }
    changed();
  }
}

}  // namespace fraglab::gui
