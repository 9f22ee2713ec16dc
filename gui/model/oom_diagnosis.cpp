#include "gui/model/oom_diagnosis.h"
#include "import/trace_import.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace fraglab::gui {

namespace {
std::atomic<int> running{0};
}

uint64_t request_arrival_event(const Trace& trace, uint64_t oom_event, uint64_t* freed) {
  uint64_t i = std::min<uint64_t>(oom_event, trace.events.size()), bytes = 0;
  while (i > 0 &&
         (trace.events[i - 1].kind == EventKind::SegmentFree || trace.events[i - 1].kind == EventKind::SegmentUnmap)) {
    bytes += trace.events[i - 1].size;
    --i;
  }
  if (freed) *freed = bytes;
  return i > 0 ? i - 1 : 0;
}

bool OomDiagnosisRun::any_running() { return running.load() > 0; }

OomDiagnosisRun::OomDiagnosisRun(std::shared_ptr<const TraceInfo> trace, std::optional<uint64_t> capacity,
                                 std::function<void()> notify, std::vector<std::string> probes)
    : shared_(std::make_shared<Shared>()) {
  shared_->notify = std::move(notify);
  // --capacity as given, else the limit read with the trace (TraceInfo::inferred_capacity, capacity_for's).
  std::optional<uint64_t> cap = capacity ? capacity : trace->inferred_capacity;
  if (!capacity) note_ = trace->capacity_note;
  ++running;
  std::thread([shared = shared_, trace = std::move(trace), cap, probes = std::move(probes)] {
    work(shared, trace, cap, probes);
    --running;
  }).detach();
}

OomDiagnosisRun::~OomDiagnosisRun() {
  std::lock_guard lock(shared_->mutex);
  shared_->abandoned = true;
}

std::shared_ptr<const DiagnoseReport> OomDiagnosisRun::report() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->report;
}

bool OomDiagnosisRun::verdict_done() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->verdict_done;
}

bool OomDiagnosisRun::settled() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->verdict_done || !shared_->error.empty();
}

std::string OomDiagnosisRun::error() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->error;
}

void OomDiagnosisRun::work(std::shared_ptr<Shared> shared, std::shared_ptr<const TraceInfo> trace,
                           std::optional<uint64_t> capacity, const std::vector<std::string>& probes) {
  auto publish = [&](auto&& change) {
    std::lock_guard lock(shared->mutex);
    change();
    if (!shared->abandoned && shared->notify) shared->notify();
    return !shared->abandoned;
  };
  try {
    DiagnoseOptions o;
    o.jobs = 1;  // the UI and the policy replays share the machine
    std::optional<BatchModel> model;
    for (bool search : {false, true}) {
      o.search = search;
      if (search && !probes.empty()) {  // the batch what-if with the verdict (loading the probes takes a while)
        std::vector<BatchProbe> loaded;
        for (const auto& text : probes) {
          auto [path, batch] = parse_probe_arg(text);
          loaded.push_back({path, batch, load_trace(path, {kAnyDevice})});
        }
        model.emplace(std::move(loaded));
        o.probes = &*model;
      }
      auto r = std::make_shared<DiagnoseReport>(diagnose(trace->trace, trace->path, capacity, o));
      bool wanted = publish([&] {
        shared->report = std::move(r);
        shared->verdict_done = search;
      });
      if (!wanted) return;
    }
  } catch (const std::exception& e) {
    publish([&] { shared->error = e.what(); });
  }
}

}  // namespace fraglab::gui
