// The OOM view's model: `fraglab diagnose`'s reading (report/diagnose.h) of every OOM of the
// loaded trace, on a worker. First without the settings search, so the states show at once,
// then with it for the verdict (the setting that would have fit), which replays the trace
// under many settings and takes longer. diagnose() cannot be cancelled, so the worker is
// detached and owns its state: closing the view or the trace never waits for a search.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gui/model/trace_info.h"
#include "report/diagnose.h"

namespace fraglab::gui {

// The event the cursor goes to for a diagnosis, the one the timeline and toolbar name for the same moment:
// an OOM's own event (its state is the one just before it, and an oom entry changes no memory); for a
// peak, the event that set it (diagnose looks at the state just after it, before the next event).
inline uint64_t shown_event(const Diagnosis& d) {
  return d.source == Diagnosis::Source::Peak && d.event_index > 0 ? d.event_index - 1 : d.event_index;
}

// A recorded OOM: PyTorch's allocator, failing to serve the request, first returns its cached segments
// (segment_free / segment_unmap entries just before the `oom` entry), then reports the OOM. Diagnose reads
// the state as the request arrived, before those frees: the memory just after the event returned here (the
// last before them). `freed`: the bytes they returned.
uint64_t request_arrival_event(const Trace& trace, uint64_t oom_event, uint64_t* freed = nullptr);

class OomDiagnosisRun {
 public:
  // `capacity`: the device's, when the user set one; else inferred from the recording's OOMs.
  // `probes`: snapshots of the same program at smaller batches (PATH@BATCH, fraglab fit): the verdict then
  // names the largest batch that fits (report/batch_fit.h).
  OomDiagnosisRun(std::shared_ptr<const TraceInfo> trace, std::optional<uint64_t> capacity,
                  std::function<void()> notify = {}, std::vector<std::string> probes = {});
  ~OomDiagnosisRun();
  OomDiagnosisRun(const OomDiagnosisRun&) = delete;
  OomDiagnosisRun& operator=(const OomDiagnosisRun&) = delete;

  // The newest report (states first, then with the verdict); null until the first is done.
  std::shared_ptr<const DiagnoseReport> report() const;
  bool verdict_done() const;
  bool settled() const;  // the verdict is there, or the diagnosis failed
  std::string error() const;
  const std::string& capacity_note() const { return note_; }
  // A diagnosis still runs somewhere in the process (its thread uses the policy registry and
  // other statics): the app then ends with std::_Exit instead of running static destructors.
  static bool any_running();

 private:
  struct Shared {
    std::mutex mutex;
    std::shared_ptr<const DiagnoseReport> report;
    std::string error;
    bool verdict_done = false;
    bool abandoned = false;  // the owner is gone: notify no more
    std::function<void()> notify;
  };
  static void work(std::shared_ptr<Shared> shared, std::shared_ptr<const TraceInfo> trace,
                   std::optional<uint64_t> capacity, const std::vector<std::string>& probes);
  std::string note_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace fraglab::gui
