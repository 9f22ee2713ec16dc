// _fraglab: the Python binding of fraglab (python/fraglab/__init__.py is its face). Each function runs what
// the command of the same name runs (cli/command_json.h) on a trace loaded once, and returns the command's
// --json document as Python objects: the same numbers under the same keys. Errors are the command's:
// FormatError (file or name, byte offset) and PolicyError are ValueErrors carrying the CLI's message.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "allocators/policy_options.h"
#include "allocators/registry.h"
#include "cli/command_json.h"
#include "cli/fit_output.h"
#include "cli/live_output.h"
#include "import/trace_import.h"
#include "report/batch_fit.h"
#include "report/diagnose_html.h"
#include "report/policy_grid.h"
#include "sim/capacity.h"
#include "sim/replay_simulated.h"
#include "traces/formats/pytorch/pytorch_snapshot.h"
#include "traces/io/format_error.h"
#include "traces/io/gzip.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

namespace py = pybind11;
using namespace fraglab;

namespace {

// A loaded trace and the name it goes by in reports (its path, or what the caller named it).
struct PyTrace {
  std::string name;
  Trace trace;
};
using TraceRef = std::shared_ptr<PyTrace>;

py::object to_python(const nlohmann::json& j) {
  // The same text the command prints, read by Python's json: the same values, keys and order. Leaked on
  // purpose: a static py::object's destructor would run after the interpreter has finalized (a crash at exit).
  static const py::object* const loads = new py::object(py::module_::import("json").attr("loads"));
  return (*loads)(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::optional<uint64_t> capacity_arg(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return parse_size(text);
}

TraceRef load_path(const std::string& path, int device) {
  auto out = std::make_shared<PyTrace>();
  out->name = path;
  {
    py::gil_scoped_release release;
    out->trace = load_trace(path, {device});
  }
  return out;
}

// A snapshot's bytes: the pickle torch.cuda.memory._dump_snapshot writes (or its JSON), plain or gzipped.
TraceRef load_bytes(const py::bytes& data, const std::string& name, int device) {
  std::string bytes = data;
  auto out = std::make_shared<PyTrace>();
  out->name = name;
  {
    py::gil_scoped_release release;
    if (is_gzip(bytes)) bytes = gunzip(bytes, name);
    out->trace = parse_pytorch_snapshot(bytes, name, with_pytorch_model({device}));
  }
  return out;
}

// info --json (whole: the summary, and `at` when given) or only its `at` list (attribution).
py::object info_or_attribution(const TraceRef& t, const std::string& at, bool whole) {
  cli::check_at(at);
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    const auto [s, history] = compute_checked_stats(t->trace);
    if (whole) j = cli::info_json(t->name, t->trace.meta, s, history);
    if (!whole || !at.empty()) {
      nlohmann::json moments = cli::moments_json(cli::moments_at(t->trace, at.empty() ? "peak" : at, s));
      if (whole)
        j["at"] = std::move(moments);
      else
        j = std::move(moments);
    }
  }
  return to_python(j);
}

py::object info(const TraceRef& t, const std::string& at) { return info_or_attribution(t, at, true); }
py::object attribution(const TraceRef& t, const std::string& at) { return info_or_attribution(t, at, false); }

py::object replay(const TraceRef& t, const std::vector<std::string>& policies, const std::string& capacity,
                  const std::string& addresses, const std::string& pools, const std::string& on_oom, bool oracle_bound,
                  bool check) {
  if (on_oom != "stop" && on_oom != "skip") throw std::invalid_argument("on_oom '" + on_oom + "' is not stop or skip");
  auto specs = expand_policy_list(policies, {});
  if (!pools.empty()) specs = with_pool_mode(std::move(specs), pools);
  nlohmann::json out;
  {
    py::gil_scoped_release release;
    cli::PreparedReplay prepared = cli::prepare_replay(t->trace, t->name, capacity, addresses, oracle_bound);
    std::vector<ReplayResult> results;
    for (const auto& text : specs) {
      ReplayOptions options;
      options.on_oom = on_oom == "skip" ? OnOom::Skip : OnOom::Stop;
      options.check_invariants = check;
      options.oracle_bound = oracle_bound;
      MemorySource source(t->trace);
      results.push_back(replay_simulated(source, PolicySpec::parse(text), prepared.config, options, &t->trace.events));
    }
    out = {{"document", cli::replay_json(results, t->name, prepared.bounds.live_bytes)}, {"notes", prepared.notes}};
  }
  return to_python(out);
}

py::object fidelity(const TraceRef& t, const std::string& policy, const std::string& capacity, bool hints) {
  if (auto refusal = cli::fidelity_refusal(t->trace, t->name)) throw std::invalid_argument(*refusal);
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    j = cli::fidelity_json(t->name, cli::run_fidelity_check(t->trace, policy, capacity, hints));
  }
  return to_python(j);
}

py::object tune_trace(const TraceRef& t, const std::string& capacity, const std::string& policy,
                      const std::vector<std::string>& space, const std::vector<std::string>& also, unsigned jobs,
                      size_t keep) {
  TuneOptions o;
  o.policy = policy;
  for (const auto& d : space) o.space.push_back(cli::parse_dimension(d));
  if (o.space.empty() && o.policy != "pytorch")
    throw std::invalid_argument("--space is needed to tune a policy other than pytorch");
  o.capacity = capacity_arg(capacity);
  o.also = also;
  o.jobs = jobs;
  if (keep == 0) throw std::invalid_argument("keep must be positive");
  o.keep_per_dimension = keep;
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    j = cli::tune_json(fraglab::tune(t->trace, t->name, o));
  }
  return to_python(j);
}

BatchModel batch_model(const std::vector<std::pair<TraceRef, uint64_t>>& probes) {
  std::vector<BatchProbe> out;
  for (const auto& [t, batch] : probes) {
    if (batch == 0) throw std::invalid_argument(t->name + ": a probe's batch must be positive");
    out.push_back({t->name, batch, t->trace});
  }
  return BatchModel(std::move(out));
}

// A diagnosis: its JSON and, on demand, the page `diagnose --html` writes (what Jupyter shows).
struct DiagnoseResult {
  TraceRef trace;
  std::shared_ptr<BatchModel> probes;
  DiagnoseReport report;
  std::string note;
  py::object json() const { return to_python(cli::diagnose_json(report, trace->trace, probes.get())); }
  std::string html() const { return diagnose_html(report, trace->trace, "fraglab.diagnose(" + trace->name + ")"); }
};

DiagnoseResult diagnose_trace(const TraceRef& t, const std::string& capacity, const std::string& at,
                              const std::string& policy, unsigned jobs, size_t top, bool search,
                              const std::vector<std::pair<TraceRef, uint64_t>>& probes) {
  if (probes.size() == 1) throw std::invalid_argument("--probe needs two or more snapshots at different batches");
  DiagnoseResult r;
  r.trace = t;
  DiagnoseOptions o;
  o.policy = policy;
  o.at = DiagnoseAt::parse(at);
  o.jobs = jobs;
  o.top = top;
  o.search = search;
  if (!probes.empty()) {
    r.probes = std::make_shared<BatchModel>(batch_model(probes));
    o.probes = r.probes.get();
  }
  std::optional<uint64_t> cap = capacity_arg(capacity);
  py::gil_scoped_release release;
  r.report = cli::run_diagnose(t->trace, t->name, cap, o, &r.note);
  return r;
}

py::object diff(const TraceRef& a, const TraceRef& b, const std::string& policy, const std::string& capacity) {
  DiffOptions o;
  o.policy = policy;
  o.capacity = capacity_arg(capacity);
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    j = cli::diff_json(diff_traces(a->trace, a->name, b->trace, b->name, o));
  }
  return to_python(j);
}

py::object fit(const std::vector<std::pair<TraceRef, uint64_t>>& probes, const std::string& capacity,
               const TraceRef& oom, const std::vector<std::string>& settings, const std::vector<uint64_t>& batches,
               uint64_t max_batch, unsigned jobs, bool search) {
  if (probes.size() < 2)
    throw std::invalid_argument("fit needs probe snapshots at two or more batch sizes (PATH@BATCH ...)");
  if (max_batch < 1 || max_batch > (uint64_t{1} << 30))
    throw std::invalid_argument("max_batch must be between 1 and 2^30");
  FitOptions o;
  o.settings = settings;
  o.batches = batches;
  o.max_batch = max_batch;
  o.jobs = jobs;
  o.search_best = search;
  std::string capacity_note;
  if (!capacity.empty()) o.capacity = parse_size(capacity);
  if (oom) {
    auto inferred =
        capacity_for(oom->trace, capacity.empty() ? std::nullopt : std::optional<uint64_t>(o.capacity), &capacity_note);
    if (!inferred)
      throw std::invalid_argument("--oom " + oom->name + ": the snapshot records no OOM to infer the capacity from");
    o.capacity = *inferred;
  }
  if (!o.capacity) throw std::invalid_argument("fit needs the device's capacity: --capacity SIZE or --oom SNAPSHOT");
  BatchModel model = batch_model(probes);
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    j = cli::fit_json(model, fit_batch(model, o), capacity_note);
  }
  return to_python(j);
}

std::vector<std::string> policies() {
  std::vector<std::string> out;
  for (const auto& info : policy_registry()) out.push_back(info.name);
  return out;
}

}  // namespace

PYBIND11_MODULE(_fraglab, m) {
  m.doc() = "fraglab's C++ core (the fraglab package wraps it: help(fraglab))";
  // Leaked on purpose, as `loads` above: never destroyed after the interpreter.
  static const auto* const format_error = new py::exception<FormatError>(m, "FormatError", PyExc_ValueError);
  static const auto* const policy_error = new py::exception<PolicyConfigError>(m, "PolicyError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const FormatError& e) {
      PyErr_SetString(format_error->ptr(), printable(e.what()).c_str());
    } catch (const PolicyConfigError& e) {
      PyErr_SetString(policy_error->ptr(), printable(e.what()).c_str());
    }
  });
  m.attr("ANY_DEVICE") = kAnyDevice;
  py::class_<PyTrace, TraceRef>(m, "Trace")
      .def_readonly("name", &PyTrace::name)
      .def_property_readonly("format", [](const PyTrace& t) { return t.trace.meta.format; })
      .def_property_readonly("device", [](const PyTrace& t) { return t.trace.meta.device; })
      .def_property_readonly("events", [](const PyTrace& t) { return t.trace.events.size(); });
  py::class_<DiagnoseResult>(m, "DiagnoseResult")
      .def("json", &DiagnoseResult::json)
      .def("html", &DiagnoseResult::html)
      .def_readonly("note", &DiagnoseResult::note);
  m.def("load_path", &load_path, py::arg("path"), py::arg("device"));
  m.def("load_bytes", &load_bytes, py::arg("data"), py::arg("name"), py::arg("device"));
  m.def("info", &info, py::arg("trace"), py::arg("at"));
  m.def("attribution", &attribution, py::arg("trace"), py::arg("at"));
  m.def("replay", &replay, py::arg("trace"), py::arg("policies"), py::arg("capacity"), py::arg("addresses"),
        py::arg("pools"), py::arg("on_oom"), py::arg("oracle_bound"), py::arg("check"));
  m.def("fidelity", &fidelity, py::arg("trace"), py::arg("policy"), py::arg("capacity"), py::arg("hints"));
  m.def("tune", &tune_trace, py::arg("trace"), py::arg("capacity"), py::arg("policy"), py::arg("space"),
        py::arg("also"), py::arg("jobs"), py::arg("keep"));
  m.def("diagnose", &diagnose_trace, py::arg("trace"), py::arg("capacity"), py::arg("at"), py::arg("policy"),
        py::arg("jobs"), py::arg("top"), py::arg("search"), py::arg("probes"));
  m.def("diff", &diff, py::arg("a"), py::arg("b"), py::arg("policy"), py::arg("capacity"));
  m.def("fit", &fit, py::arg("probes"), py::arg("capacity"), py::arg("oom"), py::arg("settings"), py::arg("batches"),
        py::arg("max_batch"), py::arg("jobs"), py::arg("search"));
  m.def("policies", &policies);
}
