// What no allocator can have done: a recorded history that contradicts itself. A block overlapping a live
// block, a block in no segment (where the trace records its segments), more bytes live than reserved, a
// block freed twice. A recording never shows these; an edited, merged or damaged one can, and then every
// replay of it (fidelity included) answers a question about something that never ran. `info` warns with
// the first problem; `fidelity` does not call such a history exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "traces/trace.h"
#include "traces/trace_stats.h"

namespace fraglab {

struct HistoryProblems {
  uint64_t count = 0;
  uint64_t first_event = 0;  // the trace position of the first problem (count > 0)
  std::string first;         // what it is, in one line
};

// One pass over the events: segment events (and the initial state's segments) give the recorded memory,
// Alloc events with a recorded address (Event::addr != 0) the blocks; blocks are checked against the
// memory once the trace has shown any (a format without segment events is checked for overlaps alone).
// Frees of ids not live are the readers' to refuse; a snapshot's double free is counted by its importer
// (TraceMeta::double_frees) and reported here as a problem at event 0.
class HistoryChecker {
 public:
  explicit HistoryChecker(const TraceMeta& meta);
  ~HistoryChecker();
  HistoryChecker(const HistoryChecker&) = delete;
  HistoryChecker& operator=(const HistoryChecker&) = delete;
  void add(const Event* events, size_t n, uint64_t first_index);  // the next events, in trace order
  const HistoryProblems& result() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};
HistoryProblems check_history(const Trace& trace);

// A history checked as its events come, before the trace that holds it is built: the snapshot importer checks
// the entries it resolves on the reading's second core (ReadOptions::check_history_ahead), where that core
// has time to spare, instead of `info` walking 2.4M events again after the import. Where the built trace
// holds exactly that history (the same checked events in order, and nothing before them: no initial
// segments, no double frees) and the check found nothing, check_history() of the trace finds the verdict
// (by the fingerprint of what the check reads, as it finds the histories it checked before).
class HistoryCheckAhead {
 public:
  HistoryCheckAhead();
  ~HistoryCheckAhead();
  HistoryCheckAhead(const HistoryCheckAhead&) = delete;
  HistoryCheckAhead& operator=(const HistoryCheckAhead&) = delete;
  void add(const Event& e);  // the history's next event
  // With the built trace's meta: a clean verdict kept for check_history(); false where there is none to keep
  // (a problem found, initial segments or double frees in the meta).
  bool remember(const TraceMeta& meta);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// compute_stats() and the history check in one pass over `source` (what `info` reports).
struct CheckedStats {
  TraceStats stats;
  HistoryProblems history;
};
CheckedStats compute_checked_stats(EventSource& source);
CheckedStats compute_checked_stats(const Trace& whole);  // the same, its two passes on two threads

}  // namespace fraglab
