// fraglab policies: every registered policy with what it models and its options.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "allocators/registry.h"
#include "cli/commands.h"

namespace fraglab::cli {

void add_policies(CLI::App& app, CommandFn& run) {
  static bool as_json = false;
  auto* cmd = app.add_subcommand("policies", "List the allocator policies, their options and defaults");
  cmd->add_flag("--json", as_json, "Print JSON");
  cmd->callback([&run] {
    run = [] {
      if (as_json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& p : policy_registry()) {
          nlohmann::json opts = nlohmann::json::array();
          for (const auto& o : p.options)
            opts.push_back({{"key", o.key}, {"default", o.default_value}, {"help", o.help}});
          out.push_back({{"name", p.name},
                         {"summary", p.summary},
                         {"origin", p.origin},
                         {"options", opts},
                         {"offline", p.needs_whole_trace},
                         {"checked_against", p.checked_against},
                         {"accuracy_note", p.accuracy_note}});
        }
        fmt::print(
            "{}\n",
            nlohmann::json{{"schema_version", kJsonSchemaVersion}, {"command", "policies"}, {"policies", out}}.dump(2));
        return 0;
      }
      for (const auto& p : policy_registry()) {
        fmt::print("{}{}\n  {}\n  from: {}\n", p.name, p.needs_whole_trace ? " (offline)" : "", p.summary, p.origin);
        if (!p.checked_against.empty()) fmt::print("  checked against: {}\n", p.checked_against);
        if (!p.accuracy_note.empty()) fmt::print("  differs:         {}\n", p.accuracy_note);
        for (const auto& o : p.options) fmt::print("    {:<28} default {:<10} {}\n", o.key, o.default_value, o.help);
        fmt::print("\n");
      }
      return 0;
    };
  });
}

}  // namespace fraglab::cli
