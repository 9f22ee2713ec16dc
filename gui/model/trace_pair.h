// Two traces side by side (fraglab-gui A B): the `fraglab diff` comparison of the pair
// (report/trace_diff.h: recorded and replayed peaks, allocations grouped by call site, size
// class and stream, matched by key) computed on a worker, and the mapping that aligns the
// second trace's timeline with the first's, by time or by step.
//
// Steps are found alike in both traces (paired_steps): the program's own steps first
// (report/program_attribution.h: the snapshot's ProfilerStep / Optimizer.step annotations, else
// the phases of the stacks, else live-bytes hysteresis); where the two traces' counts differ, the
// same detector on both (live-bytes hysteresis with one threshold, then the loop's period by
// autocorrelation of live bytes over allocations and frees alone, so device calls, which
// one setting makes more of than another, do not stretch one trace). Aligning by step maps step
// k of one trace onto step k of the other, linearly within it; aligning by time maps each
// step's time onto the other's step (or, without matching steps, each trace's duration onto
// the other's), so neither trace is squeezed.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gui/model/series.h"
#include "gui/model/trace_info.h"
#include "report/trace_diff.h"

namespace fraglab::gui {

// Step boundaries (event indices, ascending, the first 0) of a per-event series of live
// bytes; {0} when no repeating period shows.
std::vector<uint64_t> detect_steps(const std::vector<uint32_t>& live_kib);

enum class Align { Time, Step, Events };
constexpr const char* kAlignNames[] = {"time", "step", "events"};

// Live requested bytes after each event, in KiB (what steps are detected on).
std::vector<uint32_t> live_kib(const Trace& trace);

// Step starts of two traces found by the same rule (the first the attributions' that agree in number).
struct PairedSteps {
  std::vector<uint64_t> a{0}, b{0};
  std::string how;  // "the program's steps", "live-bytes hysteresis", "the loop's period", "none agree"
};
PairedSteps paired_steps(const TraceInfo& a, const TraceInfo& b);

// Maps events of trace A to events of trace B.
struct Alignment {
  Align how = Align::Time;
  const TraceInfo* a = nullptr;
  const TraceInfo* b = nullptr;
  const std::vector<uint64_t>* steps_a = nullptr;
  const std::vector<uint64_t>* steps_b = nullptr;
  uint64_t to_b(uint64_t event_a) const;  // clamped to B's events
};

class TracePairRun {
 public:
  // Runs the diff under `policy` (a registered policy; "pytorch" when the lane is "recorded").
  TracePairRun(std::shared_ptr<const TraceInfo> a, std::shared_ptr<const TraceInfo> b, std::string policy,
               std::function<void()> notify = {});
  ~TracePairRun();
  TracePairRun(const TracePairRun&) = delete;
  TracePairRun& operator=(const TracePairRun&) = delete;

  struct Result {
    std::vector<uint64_t> steps_a, steps_b;
    std::string steps_how;                  // PairedSteps::how
    std::shared_ptr<const TraceDiff> diff;  // null while the diff's replays run
  };
  // Steps first (quick), then with the diff; null before the steps.
  std::shared_ptr<const Result> result() const;
  std::string error() const;
  bool settled() const;  // the diff is there, or failed

 private:
  void work(std::stop_token stop, std::string policy);
  void publish(std::shared_ptr<const Result> r);
  std::shared_ptr<const TraceInfo> a_, b_;
  std::function<void()> notify_;
  mutable std::mutex mutex_;
  std::shared_ptr<const Result> result_;
  std::string error_;
  bool done_ = false;
  std::jthread worker_;  // last: joins first
};

}  // namespace fraglab::gui
