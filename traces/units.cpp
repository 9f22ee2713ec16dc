#include "traces/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace fraglab {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

uint64_t parse_size(const std::string& text) {
  std::string t = trim(text);
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  if (i == 0) throw std::invalid_argument("'" + text + "' is not a size (e.g. 80GiB, 512MB, 4096)");
  double number = 0;
  try {  // "." or a digit string beyond double's range
    number = std::stod(t.substr(0, i));
  } catch (const std::exception&) {
    throw std::invalid_argument("'" + text + "' is not a size (e.g. 80GiB, 512MB, 4096)");
  }
  std::string unit = trim(t.substr(i));
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double mult = 0;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "k" || unit == "kib")
    mult = 1024.0;
  else if (unit == "m" || unit == "mib")
    mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    mult = 1e3;
  else if (unit == "mb")
    mult = 1e6;
  else if (unit == "gb")
    mult = 1e9;
  else if (unit == "tb")
    mult = 1e12;
  else
    throw std::invalid_argument("'" + text + "': unknown unit '" + unit + "' (use B, KiB, MiB, GiB, KB, MB, GB)");
  double bytes = number * mult;
  if (!std::isfinite(bytes) || bytes >= 1.8e19) throw std::invalid_argument("'" + text + "' is too large");
  return static_cast<uint64_t>(std::round(bytes));  // llround's long long would overflow from 2^63
}

std::string option_size_text(uint64_t bytes) {
  const char* units[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; ++i) {
    uint64_t unit = uint64_t{1} << (10 * (4 - i));
    if (bytes && bytes % unit == 0 && bytes / unit < 1024) return std::to_string(bytes / unit) + units[i];
  }
  return std::to_string(bytes);
}

std::string format_size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace fraglab
