// The fraglab command line: one file per command, each adding its subcommand.
// Exit codes: 0 success, 1 a negative answer (divergence, out of memory with
// --on-oom stop), 2 bad input or usage.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/command_json.h"
#include "device/sim_device.h"

namespace fraglab::cli {

// A command's work; returns the exit code. Errors are thrown (FormatError, PolicyConfigError,
// std::invalid_argument for usage) and turned into messages and exit code 2 by main.
using CommandFn = std::function<int()>;

void add_info(CLI::App& app, CommandFn& run);
void add_replay(CLI::App& app, CommandFn& run);
void add_convert(CLI::App& app, CommandFn& run);
void add_policies(CLI::App& app, CommandFn& run);
void add_gen(CLI::App& app, CommandFn& run);
void add_compare(CLI::App& app, CommandFn& run);
void add_merge(CLI::App& app, CommandFn& run);
void add_export(CLI::App& app, CommandFn& run);
void add_fidelity(CLI::App& app, CommandFn& run);
void add_tune(CLI::App& app, CommandFn& run);
void add_ops(CLI::App& app, CommandFn& run);
void add_diff(CLI::App& app, CommandFn& run);
void add_diagnose(CLI::App& app, CommandFn& run);
void add_fit(CLI::App& app, CommandFn& run);
void add_ranks(CLI::App& app, CommandFn& run);

// Every command once, in the order `fraglab --help` lists them: the function that adds it, and whether it takes
// policy names (then --plugin PATH.so loads policies before the names are looked up). main adds them from here.
struct CommandEntry {
  void (*add)(CLI::App& app, CommandFn& run);
  bool names_policies;
};
inline constexpr CommandEntry kCommands[] = {
    {add_info, false},   {add_replay, true}, {add_convert, false},  {add_policies, true}, {add_gen, false},
    {add_compare, true}, {add_merge, false}, {add_export, true},    {add_fidelity, true}, {add_tune, true},
    {add_ops, false},    {add_diff, false},  {add_diagnose, false}, {add_fit, false},     {add_ranks, false},
};

// --addresses cuda|bump: the simulated device's address model (device/address_space.h).
void add_addresses_option(CLI::App* cmd, std::string& addresses);
// --pools separate|merge: how policies treat a snapshot's private pools (allocators/pool_adaptors.h).
void add_pools_option(CLI::App* cmd, std::string& pools);

// Refuses (std::invalid_argument: exit 2) an output that is one of the inputs, which writing would
// replace: the same file by filesystem identity (a hard or symbolic link, another spelling), or
// the same path. `option` names the output in the message ("--csv").
void refuse_output_over_input(const std::vector<std::string>& inputs, const std::string& option,
                              const std::string& output);

}  // namespace fraglab::cli
