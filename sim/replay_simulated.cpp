#include "sim/replay_simulated.h"

#include <algorithm>
#include <optional>

#include "device/simulated_gpu.h"

namespace fraglab {

ReplayResult replay_simulated(EventSource& source, const PolicySpec& spec, const SimDeviceConfig& device_config,
                              const ReplayOptions& options, const std::vector<Event>* events,
                              std::vector<DeviceCall>* calls) {
  SimulatedGpu gpu(device_config);
  TrackingDevice device(gpu);
  std::optional<CallLogDevice> log;  // over the engine's stack, so the policy's calls pass it first
  if (calls) log.emplace(device);
  auto policy = make_policy(spec, log ? static_cast<Device&>(*log) : device.device(), source.meta(), events);
  let_policy_enforce(*policy, gpu.limiter());
  ReplayEngine engine(*policy, device, options);
  if (log) log->follow(engine.event_index());
  engine.run(source);
  ReplayResult result = engine.take_result();
  if (log) *calls = log->take_calls();
  result.policy = spec.text;
  std::optional<TraceBounds> bounds = options.bounds;
  if (!bounds && events) bounds = compute_bounds(*events, options.oracle_bound, options.stop_before);
  if (bounds) {
    // The engine's own count covers a streamed trace too; it stops where the replay stopped.
    result.live_bytes_bound = std::max(result.live_bytes_bound, bounds->live_bytes);
    result.oracle_bound = bounds->oracle;
  }
  return result;
}

}  // namespace fraglab
