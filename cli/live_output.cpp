#include "cli/live_output.h"

#include <fmt/core.h>

#include "traces/units.h"

namespace fraglab::cli {

nlohmann::json frames_json(const std::vector<StackFrame>& frames) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : frames) out.push_back({{"filename", f.filename}, {"line", f.line}, {"name", f.name}});
  return out;
}

nlohmann::json live_json(const std::vector<LiveShare>& shares, bool with_stack) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : shares) {
    nlohmann::json j = {{"key", s.key}, {"bytes", s.bytes}, {"count", s.count}, {"largest", s.largest}};
    if (with_stack) {
      j["via"] = s.detail;
      nlohmann::json cats = nlohmann::json::object();
      for (const auto& [c, b] : s.categories) cats[c] = b;
      j["by_category"] = cats;
      j["stack_of_largest"] = frames_json(s.stack);
    }
    out.push_back(j);
  }
  return out;
}

nlohmann::json attribution_json(const LiveAttribution& live) {
  return {{"live_bytes", live.live_bytes},
          {"live_blocks_requested", live.live_count},
          {"live_by", live.by_stacks ? "call_site" : "size_class"},
          {"live_inferred_from", live.inferred_from},
          {"live_by_site", live_json(live.by_site, true)},
          {"live_by_category", live_json(live.by_category, false)},
          {"live_by_phase", live_json(live.by_phase, false)}};
}

void print_live_attribution(const LiveAttribution& l, size_t top, const std::string& indent) {
  fmt::print("{}live {} in {} tensors; by category ({}):\n", indent, format_size(l.live_bytes), l.live_count,
             l.inferred_from);
  for (const auto& c : l.by_category)
    fmt::print("{}  {:>10}  {:>6}  {}\n", indent, format_size(c.bytes), c.count, c.key);
  fmt::print("{}live by {}:\n", indent,
             l.by_stacks ? "the line of your code that allocated it" : "size class (no stacks recorded)");
  for (size_t k = 0; k < l.by_site.size() && k < top; ++k) {
    const auto& s = l.by_site[k];
    std::string cats;
    for (size_t c = 0; c < s.categories.size() && c < 2; ++c)
      cats += fmt::format("{}{} {}", c ? ", " : "", s.categories[c].first, format_size(s.categories[c].second));
    fmt::print("{}  {:>10}  {:>6}  {}  [{}]\n", indent, format_size(s.bytes), s.count, s.key, cats);
    if (!s.detail.empty()) fmt::print("{}                      {}\n", indent, s.detail);
  }
  if (l.by_site.size() > top) fmt::print("{}  ({} more: --top or --json)\n", indent, l.by_site.size() - top);
  fmt::print("{}live by step and phase:", indent);
  for (size_t k = 0; k < l.by_phase.size() && k < 4; ++k)
    fmt::print("{} {} {}", k ? " ·" : "", l.by_phase[k].key, format_size(l.by_phase[k].bytes));
  fmt::print("\n");
}

}  // namespace fraglab::cli
