// fraglab ops TRACE -o OUT: a trace's replay events as a plain op list, for programs that
// have none of fraglab's readers (bench/torch_reference replays it through PyTorch's own
// allocator). The format is described in bench/torch_reference/torch_reference.cpp.
#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/device_arg.h"
#include "cli/stdin_input.h"
#include "import/trace_import.h"
#include "traces/io/atomic_file.h"
#include "traces/trace_io.h"

namespace fraglab::cli {

namespace {

struct OpsArgs {
  std::string path, out;
  DeviceOptions device;
};

std::string header(const Trace& trace, const std::string& path) {
  std::string s = "fraglab-ops 1\n";
  s += fmt::format("# from {} ({})\n", path, trace.meta.format);
  for (const auto& [key, value] : trace.meta.allocator_settings)
    s += fmt::format("# recorded allocator setting {} = {}\n", key, value);
  s += fmt::format("streams {}", trace.meta.streams.size());
  for (uint64_t handle : trace.meta.streams) s += fmt::format(" {}", handle);
  return s + "\n";
}

int run_ops(const OpsArgs& a) {
  refuse_output_over_input({a.path}, "-o", a.out);
  Trace trace = load_trace(a.path, {a.device.resolve().trace_device});
  AtomicFile out(a.out);
  out.write(header(trace, a.path));
  std::string chunk;
  uint64_t written = 0;
  for (const Event& e : trace.events) {
    switch (e.kind) {
      case EventKind::Alloc:
        chunk += fmt::format("a {} {} {}\n", e.id, e.size, e.stream);
        break;
      case EventKind::Free:
        chunk += fmt::format("f {}\n", e.id);
        break;
      case EventKind::EmptyCache:
        chunk += "e\n";
        break;
      default:
        continue;  // reference events are the recorder's, not the program's
    }
    ++written;
    if (chunk.size() > (1u << 20)) {
      out.write(chunk);
      chunk.clear();
    }
  }
  out.write(chunk);
  out.commit();
  fmt::print("{}: {} ops\n", a.out, written);
  return 0;
}

}  // namespace

void add_ops(CLI::App& app, CommandFn& run) {
  static OpsArgs a;
  auto* cmd = app.add_subcommand("ops",
                                 "Write a trace's allocations and frees as a plain op list "
                                 "(input of bench/torch_reference)");
  dash_reads_stdin(cmd->add_option("trace", a.path, "Trace file: " + format_list()))->required();
  cmd->add_option("-o,--output", a.out, "Op list to write")->required();
  add_device_options(cmd, a.device, false);
  cmd->callback([&run] { run = [] { return run_ops(a); }; });
}

}  // namespace fraglab::cli
