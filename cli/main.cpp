#include <fmt/core.h>

#include <exception>

#include "allocators/policy_options.h"
#include "cli/commands.h"
#include "traces/format_error.h"

namespace fraglab::cli {

SimDeviceConfig sim_config(const std::string& capacity, const std::string& addresses) {
  SimDeviceConfig config;
  if (!capacity.empty()) config.capacity = parse_size(capacity);
  config.addresses = parse_address_model(addresses).value_or(AddressModel::Cuda);
  return config;
}

void add_addresses_option(CLI::App* cmd, std::string& addresses) {
  cmd->add_option("--addresses", addresses,
                  "Simulated segment addresses: cuda (the driver's measured placement, default) or bump "
                  "(only growing, never reused)")
      ->check(CLI::IsMember({"cuda", "bump"}));
}

}  // namespace fraglab::cli

int main(int argc, char** argv) {
  using namespace fraglab;
  CLI::App app{"fraglab: replay GPU allocation traces against allocator policies"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fraglab 0.1.0");
  cli::CommandFn run;
  cli::add_info(app, run);
  cli::add_replay(app, run);
  cli::add_convert(app, run);
  cli::add_policies(app, run);
  cli::add_gen(app, run);
  cli::add_compare(app, run);
  cli::add_merge(app, run);
  cli::add_export(app, run);
  cli::add_fidelity(app, run);
  cli::add_tune(app, run);
  cli::add_ops(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    return run ? run() : 2;
  } catch (const FormatError& e) {
    fmt::print(stderr, "fraglab: error: {}\n", e.what());
  } catch (const PolicyConfigError& e) {
    fmt::print(stderr, "fraglab: error: {}\n", e.what());
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "fraglab: error: {}\n", e.what());
  } catch (const std::runtime_error& e) {
    fmt::print(stderr, "fraglab: error: {}\n", e.what());
  } catch (const std::exception& e) {
    // A broken internal invariant (a policy bug, say): report it rather than abort.
    fmt::print(stderr, "fraglab: internal error: {}\n", e.what());
    return 3;
  }
  return 2;
}
