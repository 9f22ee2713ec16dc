#include "allocators/registry.h"

#include <cctype>

#include "allocators/pool_adaptors.h"

namespace fraglab {

// One line per policy. Each allocators/<name>.cpp defines `PolicyInfo policy_info_<name>()`.
#define FRAGLAB_POLICIES(X) \
  X(passthrough)            \
  X(bestfit)                \
  X(firstfit)               \
  X(nextfit)                \
  X(worstfit)               \
  X(buddy)                  \
  X(tlsf)                   \
  X(slab)                   \
  X(pytorch)                \
  X(bfc)                    \
  X(oracle)                 \
  X(rmm_pool)               \
  X(cupy)                   \
  X(cuda_async)             \
  X(gmlake)                 \
  X(rmm_arena)              \
  X(rmm_binning)

#define FRAGLAB_DECLARE(name) PolicyInfo policy_info_##name();
FRAGLAB_POLICIES(FRAGLAB_DECLARE)
#undef FRAGLAB_DECLARE

namespace {

// The built-in policies, then those plugins add (allocators/plugin.h) at start-up.
std::vector<PolicyInfo>& registry() {
#define FRAGLAB_ENTRY(name) policy_info_##name(),
  static std::vector<PolicyInfo> policies{FRAGLAB_POLICIES(FRAGLAB_ENTRY)};
#undef FRAGLAB_ENTRY
  return policies;
}

// Names are used in option strings (name:key=value,...), file names and CSV cells.
bool valid_policy_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

}  // namespace

const std::vector<PolicyInfo>& policy_registry() { return registry(); }

void add_policy(PolicyInfo info, const std::string& source) {
  if (!valid_policy_name(info.name))
    throw PolicyConfigError(source + ": policy name '" + info.name + "' must be 1-64 letters, digits, '_', '-' or '.'");
  if (find_policy(info.name)) throw PolicyConfigError(source + ": a policy named '" + info.name + "' exists already");
  registry().push_back(std::move(info));
}

const PolicyInfo* find_policy(const std::string& name) {
  for (const auto& info : policy_registry())
    if (info.name == name) return &info;
  return nullptr;
}

std::string preallocation_note(const std::string& policy, std::optional<uint64_t> capacity) {
  try {
    PolicySpec spec = PolicySpec::parse(policy);
    const PolicyInfo* info = find_policy(spec.name);
    return info && info->preallocation ? info->preallocation(spec.options, capacity) : "";
  } catch (const PolicyConfigError&) {
    return "";  // a label that is not a policy string (tests, merged shards): nothing to say
  }
}

bool is_bound_policy(const std::string& policy) {
  const PolicyInfo* info = find_policy(policy.substr(0, policy.find(':')));
  return info && info->is_bound;
}

PolicySpec PolicySpec::parse(const std::string& text) {
  PolicySpec spec;
  spec.text = text;
  size_t colon = text.find(':');
  spec.name = text.substr(0, colon);
  if (spec.name.empty()) throw PolicyConfigError("empty policy name in '" + text + "'");
  if (colon != std::string::npos) spec.options = PolicyOptions::parse(text.substr(colon + 1));
  return spec;
}

std::pair<const PolicyInfo*, PolicyOptions> check_policy_spec(const PolicySpec& spec) {
  const PolicyInfo* info = find_policy(spec.name);
  if (!info) {
    std::string names;
    for (const auto& p : policy_registry()) names += (names.empty() ? "" : ", ") + p.name;
    throw PolicyConfigError("unknown policy '" + spec.name + "' in '" + spec.text + "' (policies: " + names + ")");
  }
  PolicyOptions own;
  for (const auto& [key, value] : spec.options.values())
    if (key != "pools") own.set(key, value);
  own.check_known(spec.name, info->options);
  const std::string pools = spec.options.get_string("pools", "separate");
  if (pools != "separate" && pools != "merge")
    throw PolicyConfigError("pools must be 'separate' or 'merge', not '" + pools + "'");
  return {info, own};
}

std::vector<std::string> with_pool_mode(std::vector<std::string> configs, const std::string& mode) {
  for (std::string& c : configs) {
    if (PolicySpec::parse(c).options.has("pools")) continue;
    c += (c.find(':') == std::string::npos ? ":" : ",") + std::string("pools=") + mode;
  }
  return configs;
}

std::unique_ptr<Policy> make_policy(const PolicySpec& spec, Device& device, const TraceMeta& meta,
                                    const std::vector<Event>* events) {
  auto [info, own] = check_policy_spec(spec);
  if (info->needs_whole_trace && !events)
    throw PolicyConfigError("policy " + spec.name + " plans offline and needs the whole trace in memory");
  auto make = [info = info, &device, own = own, &meta, events]() {
    return info->make(PolicyContext{device, own, meta, events});
  };
  if (meta.pools.size() <= 1) return make();
  if (spec.options.get_string("pools", "separate") == "merge") return make_merged_pools_policy(make());
  if (info->models_pools || info->needs_whole_trace) return make();
  std::vector<bool> emptied_on_release;
  for (const PoolInfo& p : meta.pools) emptied_on_release.push_back(p.empties_on_release);
  return make_separate_pools_policy(make, std::move(emptied_on_release));
}

}  // namespace fraglab
