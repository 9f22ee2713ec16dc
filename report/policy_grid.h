// Policy lists and option grids for corpus runs.
//
// `--policies` items are policy strings (`bestfit:align=512`, `pytorch:expandable_segments:True`)
// or `all` (every registered policy with its defaults); an item with no options may list
// several names with commas (`bestfit,passthrough`). `--grid` items multiply a policy
// string by brace sets: `pytorch:max_split_size_mb:{64,128,256}` is three configurations,
// `bestfit:align={256,512},min_segment={2MiB,20MiB}` is the cartesian product, four.
// Brackets keep their commas (`roundup_power2_divisions:[256:1,>:8]` is one value).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace fraglab {

// The most configurations a run takes (each runs on every trace): a grid that expands to more is
// refused before it is expanded, naming its count.
constexpr size_t kMaxGridConfigurations = 10000;

// Expands one grid string into its configurations, in odometer order (the last brace
// set varies fastest). Throws PolicyConfigError on unbalanced or nested braces and beyond
// kMaxGridConfigurations.
std::vector<std::string> expand_grid(const std::string& pattern);

// The policy configurations of a run: `policies` (with `all` and comma lists expanded)
// followed by every expanded grid, duplicates dropped (first occurrence kept). Every
// configuration is checked against the registry (name and option keys); throws
// PolicyConfigError naming the bad one.
std::vector<std::string> expand_policy_list(const std::vector<std::string>& policies,
                                            const std::vector<std::string>& grids);

}  // namespace fraglab
