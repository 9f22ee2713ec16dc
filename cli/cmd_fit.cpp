// fraglab fit PROBE@BATCH PROBE@BATCH... --capacity C: the largest batch that fits the device under each
// allocator setting, predicted from probe snapshots of the program at small batches (report/batch_fit.h).
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/device_arg.h"
#include "cli/fit_output.h"
#include "cli/progress.h"
#include "cli/stdin_input.h"
#include "import/trace_import.h"
#include "report/batch_fit.h"
#include "sim/capacity.h"
#include "traces/trace_io.h"
#include "traces/units.h"

namespace fraglab::cli {

namespace {

struct FitArgs {
  std::vector<std::string> probes, settings;
  std::vector<uint64_t> batches;
  std::string capacity, oom;
  DeviceOptions device;
  uint64_t max_batch = 1u << 20;
  unsigned jobs = 0;
  bool json = false, no_search = false;
};

}  // namespace

BatchModel load_batch_model(const std::vector<std::string>& args, int trace_device) {
  std::vector<BatchProbe> probes;
  for (const auto& text : args) {
    auto [path, batch] = parse_probe_arg(text);
    probes.push_back({path, batch, load_trace(path, {trace_device})});
  }
  return BatchModel(std::move(probes));
}

void add_fit(CLI::App& app, CommandFn& run) {
  static FitArgs a;
  auto* cmd = app.add_subcommand(
      "fit",
      "The largest batch that fits the device under each allocator setting, from snapshots of the program at two or "
      "more small batches (PATH@BATCH each)");
  cmd->add_option(
         "probes", a.probes,
         "Probe snapshots of one program, each PATH@BATCH (e.g. run_bs4.pickle.gz@4; standard input: -- -@4 ...)")
      ->required()
      ->transform(
          [](std::string text) {  // the PATH of '-@BATCH' read from standard input, as a trace argument's '-'
            const size_t at = text.rfind('@');
            if (at == std::string::npos || text.compare(0, at, "-") != 0) return text;
            try {
              return input_path("-") + text.substr(at);
            } catch (const std::invalid_argument& e) {
              throw CLI::ValidationError(e.what());
            }
          },
          "", "");
  cmd->add_option("--capacity", a.capacity,
                  "The device's capacity: set_per_process_memory_fraction x total memory, or what the GPU leaves "
                  "(e.g. 20GiB)");
  dash_reads_stdin(cmd->add_option(
      "--oom", a.oom, "A snapshot of the program's OOM at a larger batch: the capacity is inferred from it"));
  cmd->add_option("--setting", a.settings, "A PYTORCH_CUDA_ALLOC_CONF to answer for too (repeatable)");
  cmd->add_option("--batch", a.batches, "A batch whose predicted peak to show too (repeatable)");
  cmd->add_option("--max-batch", a.max_batch, "The largest batch searched (default 2^20)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  cmd->add_option("-j,--jobs", a.jobs, "Threads (default: every core)");
  cmd->add_flag("--no-search", a.no_search, "Skip tune's search for the best setting");
  cmd->add_flag("--json", a.json, "Print JSON (docs/diagnose.md, 'fraglab fit')");
  add_device_options(cmd, a.device);
  cmd->callback([&run] {
    run = [] {
      int dev = a.device.simulated_trace_device("fit replays on the simulated device");
      if (a.probes.size() < 2)
        throw std::invalid_argument("fit needs probe snapshots at two or more batch sizes (PATH@BATCH ...)");
      for (const auto& p : a.probes) parse_probe_arg(p);  // a usage error before any loading
      FitOptions o;
      o.settings = a.settings;
      o.batches = a.batches;
      o.max_batch = a.max_batch;
      o.jobs = a.jobs;
      o.search_best = !a.no_search;
      std::string capacity_note;
      if (!a.capacity.empty()) o.capacity = parse_size(a.capacity);
      if (!a.oom.empty()) {
        Trace oom = load_trace(a.oom, {dev});
        auto inferred =
            capacity_for(oom, a.capacity.empty() ? std::nullopt : std::optional<uint64_t>(o.capacity), &capacity_note);
        if (!inferred)
          throw std::invalid_argument("--oom " + a.oom + ": the snapshot records no OOM to infer the capacity from");
        o.capacity = *inferred;
      }
      if (!o.capacity)
        throw std::invalid_argument("fit needs the device's capacity: --capacity SIZE or --oom SNAPSHOT");
      Progress progress("fit: reading the probes");
      BatchModel model = load_batch_model(a.probes, dev);
      progress.stage("fit: replaying batch sizes");
      FitReport r = fit_batch(model, o);
      progress.done();
      if (a.json)
        fmt::print("{}\n",
                   fit_json(model, r, capacity_note).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
      else
        print_fit(model, r, capacity_note);
      return r.answers.front().largest_batch ? 0 : 1;
    };
  });
}

}  // namespace fraglab::cli
