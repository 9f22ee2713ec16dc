// The policy registry: every policy by name, with its options and a factory.
// Adding a policy is one file in allocators/ plus one line in registry.cpp.
#pragma once

#include <functional>
#include <memory>
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
  // Every block address the policy hands out (with default options) is a multiple of this;
  // the invariant harness checks it. BFC uses 256, cudaMalloc-like policies 512.
  uint64_t alignment = 512;
  // The most physical bytes the policy may still hold after empty_cache() with nothing
  // live (with default options): 0 for caching policies, which return every free segment;
  // a policy that keeps a fixed initial pool or a release threshold says how much here.
  uint64_t reserved_after_empty_cache = 0;
};

// A parsed `name:options` string.
struct PolicySpec {
  std::string name;
  PolicyOptions options;
  std::string text;  // as the user wrote it; names the configuration in reports

  static PolicySpec parse(const std::string& text);  // throws PolicyConfigError
};

const std::vector<PolicyInfo>& policy_registry();
const PolicyInfo* find_policy(const std::string& name);  // nullptr when unknown

// Builds the policy; throws PolicyConfigError for an unknown name or option.
std::unique_ptr<Policy> make_policy(const PolicySpec& spec, Device& device, const TraceMeta& meta,
                                    const std::vector<Event>* events = nullptr);

}  // namespace fraglab
