#include "sim/replay_simulated.h"

#include <algorithm>
#include <optional>

#include "device/simulated_gpu.h"

namespace fraglab {

namespace {

bool has_recorded_segments(const std::vector<Event>& events, const InitialState& initial) {
  if (!initial.segments.empty()) return true;
  return std::any_of(events.begin(), events.end(), [](const Event& e) {
    return e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap;
  });
}

}  // namespace

AddressModel addresses_for(AddressModel asked, const PolicySpec& spec, const TraceMeta& meta,
                           const std::vector<Event>* events) {
  if (asked != AddressModel::Auto && asked != AddressModel::Recorded) return asked;
  auto recorded = [&] { return events && has_recorded_segments(*events, meta.initial); };
  if (asked == AddressModel::Recorded) return recorded() ? AddressModel::Recorded : AddressModel::Cuda;
  // The recording allocator's model under its own settings asks for the recorded segments, call for call
  // where `fidelity` is exact: the driver's own answers are the truth there, and the CUDA model's only a
  // good guess (a process takes device memory the trace does not show, which moves later segments).
  // (Its `limit` option only says how to read the recording's limit, and `pools=separate` is the default.)
  const auto& options = spec.options.values();
  const bool own_model = spec.name == "pytorch" && std::all_of(options.begin(), options.end(), [](const auto& kv) {
                           return kv.first == "limit" || (kv.first == "pools" && kv.second == "separate");
                         });
  return own_model && recorded() ? AddressModel::Recorded : AddressModel::Cuda;  // other policies scan nothing
}

SimDeviceConfig with_addresses_for(SimDeviceConfig config, const PolicySpec& spec, const TraceMeta& meta,
                                   const std::vector<Event>* events) {
  config.addresses = addresses_for(config.addresses, spec, meta, events);
  return config;
}

ReplayResult replay_simulated(EventSource& source, const PolicySpec& spec, const SimDeviceConfig& device_config,
                              const ReplayOptions& options, const std::vector<Event>* events,
                              std::vector<DeviceCall>* calls) {
  const SimDeviceConfig config = with_addresses_for(device_config, spec, source.meta(), events);
  SimulatedGpu gpu(config, events, &source.meta().initial);
  TrackingDevice device(gpu);
  std::optional<CallLogDevice> log;  // over the engine's stack, so the policy's calls pass it first
  if (calls) log.emplace(device);
  auto policy = make_policy(spec, log ? static_cast<Device&>(*log) : device.device(), source.meta(), events);
  let_policy_enforce(*policy, gpu.limiter());
  ReplayEngine engine(*policy, device, options);
  engine.set_policy_name("policy '" + spec.text + "'");
  if (log) log->follow(engine.event_index());
  engine.run(source);
  ReplayResult result = engine.take_result();
  if (log) *calls = log->take_calls();
  result.policy = spec.text;
  result.addresses = config.addresses;
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
