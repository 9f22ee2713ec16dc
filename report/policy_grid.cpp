#include "report/policy_grid.h"

#include <fmt/core.h>

#include <algorithm>

#include "allocators/registry.h"

namespace fraglab {

namespace {

// Splits a brace body at commas outside brackets.
std::vector<std::string> split_alternatives(const std::string& body, const std::string& pattern) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : body) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  for (const auto& alt : out)
    if (alt.empty()) throw PolicyConfigError("empty alternative in grid '" + pattern + "'");
  return out;
}

std::vector<std::string> split_names(const std::string& item) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= item.size()) {
    size_t comma = item.find(',', start);
    if (comma == std::string::npos) comma = item.size();
    if (comma > start) out.push_back(item.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

void check_configuration(const std::string& text) { check_policy_spec(PolicySpec::parse(text)); }

}  // namespace

std::vector<std::string> expand_grid(const std::string& pattern) {
  // Literal pieces between brace sets, and the alternatives of each set.
  std::vector<std::string> literals{""};
  std::vector<std::vector<std::string>> sets;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '}') throw PolicyConfigError("unbalanced '}' in grid '" + pattern + "'");
    if (c != '{') {
      literals.back() += c;
      continue;
    }
    size_t close = pattern.find('}', i + 1);
    if (close == std::string::npos) throw PolicyConfigError("unbalanced '{' in grid '" + pattern + "'");
    std::string body = pattern.substr(i + 1, close - i - 1);
    if (body.find('{') != std::string::npos) throw PolicyConfigError("nested braces in grid '" + pattern + "'");
    sets.push_back(split_alternatives(body, pattern));
    literals.emplace_back();
    i = close;
  }
  // Count before expanding: a short pattern multiplies to any number ({a,b}x60 is 2^60).
  double count = 1;
  for (const auto& set : sets) count *= static_cast<double>(set.size());
  if (count > static_cast<double>(kMaxGridConfigurations))
    throw PolicyConfigError(fmt::format("grid '{}' expands to {:.0f} configurations; at most {} are allowed",
                                        pattern.size() > 80 ? pattern.substr(0, 77) + "..." : pattern, count,
                                        kMaxGridConfigurations));
  std::vector<std::string> out;
  std::vector<size_t> digit(sets.size(), 0);  // odometer over the sets
  while (true) {
    std::string s = literals[0];
    for (size_t k = 0; k < sets.size(); ++k) s += sets[k][digit[k]] + literals[k + 1];
    out.push_back(s);
    size_t k = sets.size();
    while (k > 0 && ++digit[k - 1] == sets[k - 1].size()) digit[--k] = 0;
    if (k == 0) break;
  }
  return out;
}

std::vector<std::string> expand_policy_list(const std::vector<std::string>& policies,
                                            const std::vector<std::string>& grids) {
  std::vector<std::string> all;
  for (const auto& item : policies) {
    bool plain = item.find_first_of(":=") == std::string::npos;
    for (const auto& name : plain ? split_names(item) : std::vector<std::string>{item}) {
      if (name == "all")
        for (const auto& info : policy_registry()) all.push_back(info.name);
      else
        all.push_back(name);
    }
  }
  for (const auto& g : grids) {
    auto expanded = expand_grid(g);
    if (all.size() + expanded.size() > kMaxGridConfigurations)
      throw PolicyConfigError(
          fmt::format("--policies and --grid make {} configurations or more; at most {} are allowed",
                      all.size() + expanded.size(), kMaxGridConfigurations));
    for (auto& s : expanded) all.push_back(std::move(s));
  }
  std::vector<std::string> out;
  for (auto& s : all) {
    if (std::find(out.begin(), out.end(), s) != out.end()) continue;
    check_configuration(s);
    out.push_back(std::move(s));
  }
  if (out.empty()) throw PolicyConfigError("no policies to compare (use --policies or --grid)");
  return out;
}

}  // namespace fraglab
