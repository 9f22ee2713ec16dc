// fraglab convert IN OUT [--to FORMAT]: between snapshot (read only), native and JSON Lines.
#include <fmt/core.h>

#include <chrono>
#include <filesystem>

#include "allocators/policy_options.h"
#include "cli/commands.h"
#include "cli/device_arg.h"
#include "cli/progress.h"
#include "cli/stdin_input.h"
#include "import/trace_import.h"
#include "traces/trace_io.h"

namespace fraglab::cli {

namespace {
// What the reader dropped from a damaged or cut history (TraceMeta): the output holds the history without
// it, so the conversion says so rather than writing a cleaner trace than the input in silence.
void print_dropped(const TraceMeta& m) {
  if (m.double_frees)
    fmt::print(stderr,
               "note: {} double free{} dropped (a block freed again with no allocation at its address between: a "
               "damaged history; `fraglab info` says where)\n",
               m.double_frees, m.double_frees == 1 ? "" : "s");
  if (m.dropped_unknown_frees)
    fmt::print(stderr, "note: {} free{} of blocks that lie in no segment the snapshot shows dropped\n",
               m.dropped_unknown_frees, m.dropped_unknown_frees == 1 ? "" : "s");
  if (m.dropped_stale_entries)
    fmt::print(stderr,
               "note: {} history entr{} older than those before them dropped (the ring was made smaller while it "
               "recorded)\n",
               m.dropped_stale_entries, m.dropped_stale_entries == 1 ? "y" : "ies");
}
}  // namespace

void add_convert(CLI::App& app, CommandFn& run) {
  static std::string in, out, to;
  static DeviceOptions device;
  auto* cmd = app.add_subcommand("convert", "Convert a trace between formats (by extension or --to)");
  dash_reads_stdin(cmd->add_option("input", in, "Input trace: " + format_list()))->required();
  cmd->add_option("output", out, "Output trace: " + writable_format_list())->required();
  cmd->add_option("--to", to,
                  "Output format: " + writable_format_list() +
                      " (default: from the extension); a snapshot needs a policy's placement, see `fraglab export`");
  add_device_options(cmd, device, false);
  cmd->callback([&run] {
    run = [] {
      refuse_output_over_input({in}, "output", out);
      TraceFormat format = to.empty() ? format_for_path(out) : parse_format_name(to);
      auto start = std::chrono::steady_clock::now();
      Progress progress("convert: reading the trace");
      auto source = open_trace(in, {device.resolve().trace_device});
      progress.stage("convert: writing " + out);
      auto writer = create_writer(out, format, source->meta());
      std::vector<Event> buf(1 << 16);
      uint64_t n = 0;
      while (size_t got = source->read(buf.data(), buf.size())) {
        writer->write(buf.data(), got);
        n += got;
      }
      writer->finish();
      progress.done();
      print_dropped(source->meta());
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::error_code ec;  // a device or pipe written through has no size
      uintmax_t bytes = std::filesystem::is_regular_file(out, ec) ? std::filesystem::file_size(out, ec) : 0;
      fmt::print("wrote {} events to {} ({}, {} bytes) in {:.3f} s ({:.1f} M events/s)\n", n, out, format_name(format),
                 bytes, seconds, seconds > 0 ? static_cast<double>(n) / seconds / 1e6 : 0.0);
      return 0;
    };
  });
}

}  // namespace fraglab::cli
