#include "allocators/policy_options.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include <fmt/core.h>

namespace fraglab {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Splits at commas outside brackets.
std::vector<std::string> split_items(const std::string& text) {
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw PolicyConfigError("unbalanced brackets in options '" + text + "'");
  items.push_back(cur);
  return items;
}

}  // namespace

PolicyOptions PolicyOptions::parse(const std::string& text) {
  PolicyOptions opts;
  if (trim(text).empty()) return opts;
  for (const std::string& raw : split_items(text)) {
    std::string item = trim(raw);
    if (item.empty()) continue;
    size_t sep = item.find_first_of("=:");
    if (sep == std::string::npos || sep == 0)
      throw PolicyConfigError("option '" + item + "' is not key=value or key:value");
    opts.values_[trim(item.substr(0, sep))] = trim(item.substr(sep + 1));
  }
  return opts;
}

std::string PolicyOptions::get_string(const std::string& key, const std::string& def) const {
  auto it = values_.find(key);
  return it == values_.end() ? def : it->second;
}

uint64_t PolicyOptions::get_size(const std::string& key, uint64_t def, uint64_t max) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  uint64_t v = 0;
  try {
    v = parse_size(it->second);
  } catch (const std::invalid_argument& e) {
    throw PolicyConfigError("option " + key + ": " + e.what());
  }
  if (v > max)
    throw PolicyConfigError("option " + key + ": '" + it->second + "' is larger than the most it accepts, " +
                            format_size(max) + " (" + std::to_string(max) + " bytes)");
  return v;
}

int64_t PolicyOptions::get_int(const std::string& key, int64_t def, int64_t min, int64_t max) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != it->second.size())
    throw PolicyConfigError("option " + key + ": '" + it->second + "' is not an integer");
  if (v < min || v > max)
    throw PolicyConfigError("option " + key + ": " + std::to_string(v) + " is outside " + std::to_string(min) + ".." +
                            std::to_string(max));
  return v;
}

double PolicyOptions::get_double(const std::string& key, double def) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != it->second.size() || !std::isfinite(v))
    throw PolicyConfigError("option " + key + ": '" + it->second + "' is not a number");
  return v;
}

bool PolicyOptions::get_bool(const std::string& key, bool def) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  std::string v;
  for (char c : it->second) v += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return false;
  throw PolicyConfigError("option " + key + ": '" + it->second + "' is not true or false");
}

OptionSpec::OptionSpec(const SizeOption& o)
    : OptionSpec(std::string(o.key), option_size_text(o.default_value), std::string(o.help)) {}
OptionSpec::OptionSpec(const IntOption& o)
    : OptionSpec(std::string(o.key), std::to_string(o.default_value), std::string(o.help)) {}
OptionSpec::OptionSpec(const DoubleOption& o)
    : OptionSpec(std::string(o.key), fmt::format("{}", o.default_value), std::string(o.help)) {}
OptionSpec::OptionSpec(const BoolOption& o)
    : OptionSpec(std::string(o.key), o.default_value ? "true" : "false", std::string(o.help)) {}
OptionSpec::OptionSpec(const TextOption& o)
    : OptionSpec(std::string(o.key), std::string(o.shown_default), std::string(o.help)) {}

void PolicyOptions::check_known(const std::string& policy, const std::vector<OptionSpec>& specs) const {
  for (const auto& [key, value] : values_) {
    bool known = false;
    for (const auto& s : specs) known = known || s.key == key;
    if (known) continue;
    std::string valid;
    for (const auto& s : specs) valid += (valid.empty() ? "" : ", ") + s.key;
    throw PolicyConfigError("policy " + policy + " has no option '" + key + "'" +
                            (valid.empty() ? " (it takes none)" : " (options: " + valid + ")"));
  }
}

std::string PolicyOptions::to_string() const {
  std::string out;
  for (const auto& [k, v] : values_) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

}  // namespace fraglab
