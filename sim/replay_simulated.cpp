#include "sim/replay_simulated.h"

#include <algorithm>

#include "device/simulated_gpu.h"

namespace fraglab {

ReplayResult replay_simulated(EventSource& source, const PolicySpec& spec, const SimDeviceConfig& device_config,
                              const ReplayOptions& options, const std::vector<Event>* events) {
  SimulatedGpu gpu(device_config);
  TrackingDevice device(gpu);
  auto policy = make_policy(spec, device, source.meta(), events);
  ReplayEngine engine(*policy, device, options);
  engine.run(source);
  ReplayResult result = engine.take_result();
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
