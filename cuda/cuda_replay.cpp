#include "cuda/cuda_replay.h"

#include <chrono>

#include "allocators/registry.h"
#include "cuda/cuda_error.h"
#include "cuda/cuda_streams.h"
#include "cuda/native_baselines.h"
#include "device/limiting_device.h"
#include "device/tracking_device.h"
#include "sim/replay_simulated.h"

namespace fraglab::cuda {

namespace {

using Clock = std::chrono::steady_clock;

ReplayResult predict(const Trace& trace, const PolicySpec& spec, const CudaReplayOptions& options,
                     uint64_t granularity) {
  SimDeviceConfig config;
  config.capacity = options.capacity;
  config.granularity = granularity;  // the simulator pages like this GPU does
  ReplayOptions replay;
  replay.on_oom = options.on_oom;
  MemorySource source(trace);
  return replay_simulated(source, spec, config, replay, &trace.events);
}

void touch(const BlockRecord& block, const Event& e, const StreamSet& streams) {
  if (e.size == 0) return;
  FRAGLAB_CUDA_CHECK(cudaMemsetAsync(reinterpret_cast<void*>(block.addr), 0xA5, e.size, streams[e.stream]));
}

// Gives every block still live back to the policy and asks it to empty its cache: what is
// still held afterwards the policy kept (reported, then released by the device).
uint64_t hand_everything_back(Policy& policy, const ReplayEngine& engine, const TrackingDevice& device) {
  for (const BlockRecord& b : engine.blocks())
    if (b.live) policy.deallocate(Block{b.addr, b.size, b.handle});
  policy.empty_cache();
  return device.reserved_bytes();
}

CudaReplayResult replay_policy(const Trace& trace, const PolicySpec& spec, const CudaReplayOptions& options) {
  CudaReplayResult out;
  out.policy = spec.text;
  out.kind = "policy";
  out.touched = options.touch;
  // The capacity is enforced by the same adaptor as in the simulator (a policy that keeps itself within it,
  // PyTorch's under a memory fraction, checks it itself there and here): the GPU refuses only what it lacks.
  CudaDevice device({options.ordinal, std::nullopt});
  LimitingDevice limited(device, options.capacity);
  out.gpu = device.name();
  out.ordinal = device.ordinal();
  if (options.simulate) out.simulated = predict(trace, spec, options, device.granularity());

  StreamSet streams(trace.meta.streams.size());
  warm_up(streams);
  device.reset_driver_baseline();
  out.free_before = device.driver().free_at_start;
  {
    TrackingDevice tracking(limited);
    auto policy = make_policy(spec, tracking, trace.meta, &trace.events);
    let_policy_enforce(*policy, limited);
    ReplayOptions replay;
    replay.on_oom = options.on_oom;
    ReplayEngine engine(*policy, tracking, replay);
    engine.set_policy_name("policy '" + spec.text + "'");
    engine.establish_initial_state(trace.meta.initial);
    LatencyLog mallocs, frees;
    mallocs.reserve(trace.events.size() / 2);
    frees.reserve(trace.events.size() / 2);
    auto start = Clock::now();
    for (uint64_t i = 0; i < trace.events.size(); ++i) {
      const Event& e = trace.events[i];
      bool go = true;
      if (e.kind == EventKind::Alloc) {
        size_t ooms = engine.result().ooms.size();
        auto t0 = Clock::now();
        go = engine.apply(e, i);
        auto t1 = Clock::now();
        if (engine.result().ooms.size() == ooms) {  // failed attempts are not allocation latency
          mallocs.add(t1 - t0);
          if (options.touch) touch(engine.blocks()[e.id], e, streams);
        }
      } else if (e.kind == EventKind::Free) {
        go = timed(frees, [&] { return engine.apply(e, i); });
      } else {
        go = engine.apply(e, i);
      }
      if (!go) break;
    }
    streams.synchronize();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    out.counted = engine.take_result();
    out.counted.policy = spec.text;
    out.counted.seconds = seconds;
    out.seconds = seconds;
    out.malloc_latency = mallocs.summary();
    out.free_latency = frees.summary();
    out.held_at_end = hand_everything_back(*policy, engine, tracking);
  }
  device.release_everything();
  FRAGLAB_CUDA_CHECK(cudaDeviceSynchronize());
  out.driver = device.sample_driver();
  out.free_after = out.driver.free_now;
  return out;
}

}  // namespace

bool is_native_baseline(const std::string& policy_name) {
  return policy_name == "cuda_malloc" || policy_name == "cuda_malloc_async";
}

CudaReplayResult replay_on_cuda(const Trace& trace, const std::string& policy_text, const CudaReplayOptions& options) {
  PolicySpec spec = PolicySpec::parse(policy_text);
  if (spec.name == "cuda_malloc") return replay_cuda_malloc(trace, spec, options);
  if (spec.name == "cuda_malloc_async") return replay_cuda_malloc_async(trace, spec, options);
  // Check the name and options on the simulator first: a typo should not cost a GPU context.
  SimDevice probe;
  make_policy(spec, probe, trace.meta, &trace.events);
  return replay_policy(trace, spec, options);
}

}  // namespace fraglab::cuda
