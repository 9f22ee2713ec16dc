// Histories recorded with `torch.cuda.memory._record_memory_history(skip_actions=[...])` (PyTorch 2.11): the
// allocator leaves whole kinds of entries out (alloc, free_requested, free_completed, segment_alloc,
// segment_free, segment_map, segment_unmap, snapshot, oom) and the snapshot does not say which. A kind is
// taken as skipped where the data shows it: it never appears while its counterpart does, and the history needs
// it, which a history begun mid-run or a wrapped ring never does: an address freed twice with no alloc between
// (alloc); a block reused after its free_requested (free_completed); a block allocated in the history and
// freed without a request (free_requested); an address allocated twice with no free at all (both frees); an
// allocation inside a segment the history released and never made again (segment_alloc, segment_map); a
// segment made over one never released, or gone at the end (segment_free, segment_unmap).
// Each is then read for what it is, and TraceMeta::skipped_actions says what its absence costs:
//  - free_completed: every free is taken at its free_requested (exact where one stream used each block);
//  - free_requested: nothing changes (reuse waits for free_completed, which is kept);
//  - both: a block is taken as freed just before its address is allocated again (the latest it can be);
//  - alloc: nothing to replay (the allocations are what a replay places): read as the final state;
//  - segment_alloc: each segment made just before the first allocation in it (PyTorch makes a segment for
//    the request that needs it) or, where a block in it was live first, there before the history;
//  - segment_free / segment_unmap: a release taken at the latest moment, just before a segment or range
//    made over the same addresses, else at the end;
//  - segment_map: not inferred (pages are mapped as requests need them): said, the state at the first entry
//    holds the ranges the history unmaps.
// `snapshot` and `oom` cost nothing to read (markers; an OOM is also an exception the program saw).
#pragma once

#include <cstdint>
#include <vector>

#include "traces/formats/pytorch/entry_offsets.h"
#include "traces/formats/pytorch/history_index.h"
#include "traces/trace.h"

namespace fraglab {

struct SkipReading {
  std::vector<SkippedAction> skipped;
  // No alloc entries: the history cannot be replayed; the snapshot reads as its final state.
  bool history_unusable = false;
  // No free_requested entries: a block whose first entry is its free_completed was simply live at the first
  // entry (not a free requested before it).
  bool requests_skipped = false;
};

// `history`: the device's entries at address level (Alloc with the block address and requested size,
// FreeRequested, Free for free_completed, Segment* with the segment or range); `offsets` beside it, kept
// aligned (an inferred entry takes its neighbour's). Rewritten where a skipped kind is inferred. `index`: the
// history's as read (traces/formats/pytorch/history_index.h), or null (the history is scanned).
SkipReading read_skipped_actions(std::vector<Event>& history, EntryOffsets& offsets,
                                 const std::vector<RecordedSegment>& final_segments,
                                 const HistoryIndex* index = nullptr);

}  // namespace fraglab
