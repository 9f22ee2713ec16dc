// The policy registry: every policy by name, with its options and a factory.
// Adding a policy is one file in allocators/ plus one line in registry.cpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "allocators/policy.h"

namespace fraglab {

struct PolicyInfo {
  std::string name;
  std::string summary;  // one line: what it models
  std::string origin;   // where the design comes from (paper, library and file)
  std::vector<OptionSpec> options;
  std::function<std::unique_ptr<Policy>(const PolicyContext&)> make;
  bool needs_whole_trace = false;  // offline planners see the future
  // The policy routes requests by their private pool itself (Event::pool); others are given one
  // instance per pool by the `pools` option (allocators/pool_adaptors.h).
  bool models_pools = false;
  // Every block address the policy hands out (with default options) is a multiple of this;
  // the invariant harness checks it. BFC uses 256, cudaMalloc-like policies 512.
  uint64_t alignment = 512;
  // The most physical bytes the policy may still hold after empty_cache() with nothing
  // live (with default options): 0 for caching policies, which return every free segment;
  // a policy that keeps a fixed initial pool or a release threshold says how much here.
  uint64_t reserved_after_empty_cache = 0;
  // True when the policy keeps reserved virtual address ranges (address space only, no
  // physical memory) after empty_cache with nothing live, as a cudaMemPool keeps its range.
  bool keeps_address_ranges = false;
  // A bound, not a contender: reports rank the other policies and show these beside them.
  // `passthrough` reserves the least a policy can without caching, at a driver call per
  // request (~60 us on an H100 against ~0.2 us for a cached block); `oracle` knows the future.
  bool is_bound = false;
  // What the policy takes from the device before it is asked (an arena, an initial pool) for
  // a configuration's options on a device of that capacity (nullopt = unlimited); "" when it
  // grows only on demand. Reports print it beside peak reserved, which includes it.
  std::function<std::string(const PolicyOptions&, std::optional<uint64_t> capacity)> preallocation = nullptr;
  // The real allocator, at which version, the model was replayed against on a GPU and how close
  // it came (tools/peers and docs/peers.md; bench/torch_reference for pytorch); "" when never.
  std::string checked_against = {};
  // Where the policy is known to differ from the real allocator it models: printed with every
  // prediction (replay's text and JSON), never left silent. Empty for exact models.
  std::string accuracy_note = {};
};

// The preallocation note of a policy string ("" when none, or the policy is unknown).
std::string preallocation_note(const std::string& policy, std::optional<uint64_t> capacity);
// True when the policy string names a bound (PolicyInfo::is_bound).
bool is_bound_policy(const std::string& policy);

// A parsed `name:options` string.
struct PolicySpec {
  std::string name;
  PolicyOptions options;
  std::string text;  // as the user wrote it; names the configuration in reports

  static PolicySpec parse(const std::string& text);  // throws PolicyConfigError
};

const std::vector<PolicyInfo>& policy_registry();
// Registers a policy at run time (plugins, allocators/plugin.h; `source` names it in errors). Throws
// PolicyConfigError for a bad or taken name. Call before anything holds a PolicyInfo pointer.
void add_policy(PolicyInfo info, const std::string& source);
const PolicyInfo* find_policy(const std::string& name);  // nullptr when unknown

// Every policy's own option keys, plus `pools` (separate|merge, allocators/pool_adaptors.h), which
// every policy takes. Throws PolicyConfigError for an unknown name, key or `pools` value; returns
// the policy and its own options.
std::pair<const PolicyInfo*, PolicyOptions> check_policy_spec(const PolicySpec& spec);
// `configs` with `pools=<mode>` added to each that does not set it (the CLI's --pools).
std::vector<std::string> with_pool_mode(std::vector<std::string> configs, const std::string& mode);

// Builds the policy; throws PolicyConfigError for an unknown name or option.
std::unique_ptr<Policy> make_policy(const PolicySpec& spec, Device& device, const TraceMeta& meta,
                                    const std::vector<Event>* events = nullptr);

}  // namespace fraglab
