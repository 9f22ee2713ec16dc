// Fidelity: does a policy reproduce what the recording allocator did, call for call?
//
// A PyTorch snapshot records the allocator's own device calls (segment_alloc/free,
// segment_map/unmap) between the requests that caused them. fidelity replays the trace
// through a policy (normally `pytorch` under the recorded settings) on a HintedDevice, so
// segments land at their recorded addresses, and compares:
//   - the device calls: same order, kind and size, made while serving the same request
//     (a recorded call belongs to the next replay event after it);
//   - reserved bytes after every replay event (recorded: the running sum of the calls);
//   - out-of-memory: a recorded `oom` is replayed as an allocation that must fail.
// The first disagreement is reported with the events around it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

struct FidelityOptions {
  std::string policy = "pytorch";
  std::optional<uint64_t> capacity;  // set_per_process_memory_fraction's limit in bytes
  bool hint_addresses = true;
  size_t context = 6;  // trace events shown on each side of a divergence
};

struct FidelityResult {
  bool exact = false;
  uint64_t replay_events = 0;                      // replay events applied
  uint64_t device_calls = 0;                       // device calls compared (recorded)
  uint64_t reserved_checks = 0;                    // reserved-byte comparisons made
  uint64_t ooms = 0;                               // recorded OOMs reproduced
  uint64_t recorded_peak = 0, simulated_peak = 0;  // reserved bytes
  // The first divergence (when !exact).
  uint64_t event_index = 0;          // trace position
  std::string what;                  // one line
  std::vector<std::string> context;  // recorded events around it, and the simulated calls there
};

FidelityResult check_fidelity(const Trace& trace, const FidelityOptions& options);

}  // namespace fraglab
