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
  uint64_t alignment = 512;
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
