// HistoryIndex: what the snapshot importer learns of a history while reading it, so that the passes over the
// history afterwards (skipped actions, the state at the first entry, the reserved bytes' bounds, the runs of
// segment releases) visit its few thousand device calls instead of its millions of block entries. A 2.4M-entry
// recording's history is 96 MB of events: each pass that only wanted its segment entries read all of it, ~10 ms
// on a desktop core and ~30 ms on a server's, one after another on one core after the parse.
// It holds the count of each kind and the position of every entry that is not a block's (Alloc, FreeRequested,
// Free): segment calls and OOMs. Valid for the history exactly as read; the importer stops passing it once an
// entry is dropped, changed or added (a stale ring entry, an inferred skipped action).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

class HistoryIndex {
 public:
  static bool is_block_entry(EventKind k) {
    return k == EventKind::Alloc || k == EventKind::FreeRequested || k == EventKind::Free;
  }
  // The entry at position `at` (the next one: positions come in order).
  void note(EventKind kind, size_t at) {
    ++counts_[static_cast<size_t>(kind)];
    if (!is_block_entry(kind)) others_.push_back(at);
  }
  uint64_t count(EventKind k) const { return counts_[static_cast<size_t>(k)]; }
  const std::array<uint64_t, kEventKindCount>& counts() const { return counts_; }
  // Positions of the entries that are not a block's, in order.
  const std::vector<size_t>& others() const { return others_; }

 private:
  std::array<uint64_t, kEventKindCount> counts_{};
  std::vector<size_t> others_;
};

// Calls visit(i) for each position i of `history` whose entry is not a block's, in order (backwards: in
// reverse order): only the positions `index` holds where it is given, else every entry is looked at.
template <class Visit>
void for_each_other_entry(const std::vector<Event>& history, const HistoryIndex* index, Visit visit) {
  if (index) {
    for (size_t i : index->others()) visit(i);
    return;
  }
  for (size_t i = 0; i < history.size(); ++i)
    if (!HistoryIndex::is_block_entry(history[i].kind)) visit(i);
}
template <class Visit>
void for_each_other_entry_backwards(const std::vector<Event>& history, const HistoryIndex* index, Visit visit) {
  if (index) {
    for (auto it = index->others().rbegin(); it != index->others().rend(); ++it) visit(*it);
    return;
  }
  for (size_t i = history.size(); i-- > 0;)
    if (!HistoryIndex::is_block_entry(history[i].kind)) visit(i);
}

}  // namespace fraglab
