// replay_simulated: the one call that most commands make: build a policy by name on a fresh simulated
// device and replay a trace through it, with the trace's bounds (live bytes, oracle) attached.
//
// Apart from the engine (sim/replay.h) because it is where the engine meets the policy registry:
// the engine itself runs any policy it is handed and knows no names.
#pragma once

#include <vector>

#include "allocators/registry.h"
#include "device/call_log_device.h"
#include "sim/replay.h"

namespace fraglab {

// The address model a replay of `spec` runs on when `asked` (Auto, Recorded) leaves it to the trace:
// Recorded needs a trace with recorded segment calls (else Cuda); Auto is Recorded for the `pytorch`
// policy at the trace's own settings on such a trace, Cuda otherwise.
AddressModel addresses_for(AddressModel asked, const PolicySpec& spec, const TraceMeta& meta,
                           const std::vector<Event>* events);
// `config` with its addresses so resolved: what a SimulatedGpu for `spec` on the trace is built from (with the
// trace's events and initial state, which a Recorded card follows).
SimDeviceConfig with_addresses_for(SimDeviceConfig config, const PolicySpec& spec, const TraceMeta& meta,
                                   const std::vector<Event>* events);

// Builds the policy from `spec` on a fresh SimDevice and replays `source` through it (`device_config.addresses`
// resolved by addresses_for; `events` gives the recorded addresses).
// `events` (the whole trace, may be null) is handed to offline policies. With `calls`, the policy's
// device calls are logged there in order, each tagged with its event (device/call_log_device.h).
ReplayResult replay_simulated(EventSource& source, const PolicySpec& spec, const SimDeviceConfig& device_config,
                              const ReplayOptions& options, const std::vector<Event>* events = nullptr,
                              std::vector<DeviceCall>* calls = nullptr);

}  // namespace fraglab
