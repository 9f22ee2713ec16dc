// SimulatedGpu: the simulated card a replay runs on, built from a SimDeviceConfig: a SimDevice
// (addresses, pages) under a LimitingDevice at the config's capacity (unlimited when unset). With the
// Recorded address model and a recording, a HintedDevice between them hands out the recording's segment
// addresses where the replay asks for the segment the recording asked for next (device/hinted_device.h).
#pragma once

#include <optional>
#include <vector>

#include "device/hinted_device.h"
#include "device/limiting_device.h"
#include "device/sim_device.h"

namespace fraglab {

class SimulatedGpu {
 public:
  // `recorded`, `initial`: the recording whose segment calls the Recorded model follows (its events and the
  // state at its first event); without them, Recorded is the bump model alone.
  explicit SimulatedGpu(SimDeviceConfig config, const std::vector<Event>* recorded = nullptr,
                        const InitialState* initial = nullptr)
      : sim_(upstream_config(config)),
        hinted_(hinted(config, recorded, initial, sim_)),
        limited_(hinted_ ? static_cast<Device&>(*hinted_) : sim_, config.capacity) {}
  SimulatedGpu(const SimulatedGpu&) = delete;
  SimulatedGpu& operator=(const SimulatedGpu&) = delete;

  Device& device() { return limited_; }
  LimitingDevice& limiter() { return limited_; }
  operator Device&() { return limited_; }

  static SimDeviceConfig without_capacity(SimDeviceConfig config) {
    config.capacity.reset();
    return config;
  }

 private:
  static SimDeviceConfig upstream_config(const SimDeviceConfig& config) {
    return config.addresses == AddressModel::Recorded ? hinted_upstream_config(config) : without_capacity(config);
  }
  static std::optional<HintedDevice> hinted(const SimDeviceConfig& config, const std::vector<Event>* recorded,
                                            const InitialState* initial, SimDevice& sim) {
    if (config.addresses != AddressModel::Recorded || !recorded) return std::nullopt;
    return std::optional<HintedDevice>(std::in_place, sim, *recorded, initial);
  }

  SimDevice sim_;
  std::optional<HintedDevice> hinted_;
  LimitingDevice limited_;
};

}  // namespace fraglab
