#include <fmt/core.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <new>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "allocators/plugin.h"
#include "allocators/policy_options.h"
#include "cli/commands.h"
#include "cli/stdin_input.h"
#include "traces/io/format_error.h"
#include "traces/io/read_limits.h"

namespace fraglab::cli {

void refuse_output_over_input(const std::vector<std::string>& inputs, const std::string& option,
                              const std::string& output) {
  namespace fs = std::filesystem;
  if (output.empty() || output == "-") return;
  for (const auto& input : inputs) {
    std::error_code ec;
    bool same = fs::equivalent(input, output, ec);  // false with an error where either does not exist
    if (ec) same = fs::weakly_canonical(input, ec) == fs::weakly_canonical(output, ec) && !ec;
    if (same)
      throw std::invalid_argument(fmt::format("{} '{}' is the input '{}': refusing to overwrite it", option,
                                              printable(output), printable(input)));
  }
}

namespace {

// Output that could not be written is an error like any other (`info ... > /dev/full`):
// stdout is buffered, so the last write error shows at this flush.
int check_stdout(int rc) {
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return rc;
  fmt::print(stderr, "fraglab: error: cannot write standard output: {}\n", std::strerror(errno ? errno : EIO));
  return 2;
}

// --max-expansion: how many times its size on disk an input may grow to (docs/limits.md).
void add_limit_option(CLI::App& app) {
  static std::string value;
  app.add_option("--max-expansion", value,
                 fmt::format("How many times its own size an input may inflate or expand to in memory: a positive "
                             "integer (default {}, at least {} MiB) or 'unlimited': refuses decompression and alias "
                             "bombs (docs/limits.md)",
                             ReadLimits{}.ratio, ReadLimits{}.floor_bytes >> 20))
      ->each([](const std::string& v) {
        ReadLimits limits;
        if (v == "unlimited") {
          limits.ratio = 0;
        } else {
          // Digits only: stoull would take "-1" as 2^64 - 1, and 0 (ReadLimits' unlimited) would
          // read as no expansion at all; 'unlimited' is the one way to lift the limit.
          size_t used = 0;
          unsigned long long n = 0;
          try {
            if (!v.empty() && std::isdigit(static_cast<unsigned char>(v[0]))) n = std::stoull(v, &used);
          } catch (const std::exception&) {
            used = 0;
          }
          if (used == 0 || used != v.size() || n == 0)
            throw CLI::ValidationError("--max-expansion", "'" + v + "' is not a positive integer or 'unlimited'");
          limits.ratio = n;
        }
        set_read_limits(limits);
      });
}

// --plugin PATH.so (repeatable) on a command that takes policy names: loads policy plugins
// (allocators/plugin.h) while the command line is parsed, before the command looks up a name.
void add_plugin_option(CLI::App& command) {
  static std::vector<std::string> paths;
  command
      .add_option("--plugin", paths,
                  "A shared library of policies built against the fraglab package (repeatable; "
                  "docs/architecture.md, 'Writing a policy out of tree')")
      ->each([](const std::string& path) {
        try {
          load_policy_plugin(path);
        } catch (const PolicyConfigError& e) {
          throw CLI::ValidationError(e.what());
        }
      });
}

}  // namespace

void add_addresses_option(CLI::App* cmd, std::string& addresses) {
  cmd->add_option("--addresses", addresses,
                  "Segment addresses: auto (default: the recording's own for the pytorch policy at the trace's "
                  "settings, which makes the recorded calls; cuda for the rest), cuda (the driver's measured "
                  "placement), bump (only growing, never reused) or recorded (the recording's wherever a policy asks "
                  "for the segment the recording asked for next)")
      ->check(CLI::IsMember({"auto", "cuda", "bump", "recorded"}));
}

void add_pools_option(CLI::App* cmd, std::string& pools) {
  cmd->add_option("--pools", pools,
                  "Private pools (CUDA graphs, MemPool) of a snapshot: separate (default: each pool its own "
                  "allocator, released with its owner, as graph replays need) or merge (one allocator for all, a "
                  "what-if); sets the policy option pools= where a policy does not")
      ->check(CLI::IsMember({"separate", "merge"}));
}

}  // namespace fraglab::cli

int main(int argc, char** argv) {
  using namespace fraglab;
  CLI::App app{"fraglab: replay GPU allocation traces against allocator policies"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fraglab 0.1.0");
  cli::CommandFn run;
  cli::add_limit_option(app);
  const std::function<bool(CLI::App*)> all = [](CLI::App*) { return true; };
  for (const cli::CommandEntry& command : cli::kCommands) {
    command.add(app, run);
    if (command.names_policies) cli::add_plugin_option(*app.get_subcommands(all).back());  // the one just added
  }
  // A first word that is no command's name is named in the error (CLI11 would only ask for a subcommand).
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    const std::function<bool(const CLI::App*)> every = [](const CLI::App*) { return true; };
    for (const CLI::App* sub : std::as_const(app).get_subcommands(every)) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      fmt::print(stderr, "fraglab: error: unknown command '{}' (commands: {}; fraglab --help)\n", printable(argv[1]),
                 names);
      return 2;
    }
  }
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
    return cli::check_stdout(run ? run() : 2);
  } catch (const FormatError& e) {
    fmt::print(stderr, "fraglab: error: {}\n", printable(cli::name_stdin(e.what())));
  } catch (const PolicyConfigError& e) {
    fmt::print(stderr, "fraglab: error: {}\n", printable(cli::name_stdin(e.what())));
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "fraglab: error: {}\n", printable(cli::name_stdin(e.what())));
  } catch (const std::system_error& e) {
    if (!std::ferror(stdout)) {
      fmt::print(stderr, "fraglab: error: {}\n", printable(cli::name_stdin(e.what())));
      return 2;
    }
    // fmt::print's write to a full or closed stdout: fmt says "cannot write to file"; say which.
    std::clearerr(stdout);
    fmt::print(stderr, "fraglab: error: cannot write standard output: {}\n", e.code().message());
  } catch (const std::runtime_error& e) {
    fmt::print(stderr, "fraglab: error: {}\n", printable(cli::name_stdin(e.what())));
  } catch (const std::bad_alloc&) {
    fmt::print(stderr,
               "fraglab: error: out of memory: the input needs more memory than this machine gave "
               "(docs/limits.md)\n");
  } catch (const std::exception& e) {
    // A broken internal invariant (a policy bug, say): report it rather than abort.
    fmt::print(stderr, "fraglab: internal error: {}\n", printable(cli::name_stdin(e.what())));
    return 3;
  } catch (...) {
    // Only code outside fraglab (a plugin) throws what is not a std::exception; unwinding here
    // removes temporary outputs, which std::terminate would leave.
    fmt::print(stderr, "fraglab: error: something threw an exception that is not a std::exception (a plugin?)\n");
  }
  return 2;
}
