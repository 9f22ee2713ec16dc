// SimulatedGpu: the simulated card a replay runs on, built from a SimDeviceConfig: a SimDevice
// (addresses, pages) under a LimitingDevice at the config's capacity (unlimited when unset).
#pragma once

#include "device/limiting_device.h"
#include "device/sim_device.h"

namespace fraglab {

class SimulatedGpu {
 public:
  explicit SimulatedGpu(SimDeviceConfig config) : sim_(without_capacity(config)), limited_(sim_, config.capacity) {}
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
  SimDevice sim_;
  LimitingDevice limited_;
};

}  // namespace fraglab
