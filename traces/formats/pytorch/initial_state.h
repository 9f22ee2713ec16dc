// The allocator state at a PyTorch snapshot's first trace entry, reconstructed from the
// snapshot's final segments and its history (see InitialState in traces/trace.h).
//
// Users' snapshots mostly begin mid-run: _record_memory_history() was called after the model was
// built, or its ring buffer (max_entries) dropped the oldest entries. The history then frees blocks
// it never allocated, allocates inside segments it never created and frees segments it never made.
// MemoryViz draws such blocks as "ghosts"; fraglab reconstructs the whole state so that a replay
// starts where the recording did:
//  - segments: the final segments, minus those a history `segment_alloc` created, plus those a
//    `segment_free` released (walked backwards); for expandable segments the mapped ranges, likewise
//    through `segment_map` / `segment_unmap`;
//  - live blocks: every address whose first history entry is a free (`free_requested` or
//    `free_completed`) was allocated before the history began; every block allocated in the final
//    segments that the history never mentions was live all along (its size and requested size are
//    exact);
//  - a live block's end: exact for those still in the final segments; otherwise the start of the
//    first history allocation that lands inside the space after it (best fit allocates at the start
//    of the free block it takes) before the block is freed; otherwise unknown (size 0), left to the
//    replaying model's rounding rules.
// What cannot be known is said in docs/snapshots.md.
#pragma once

#include <vector>

#include "traces/addr_map.h"
#include "traces/formats/pytorch/history_index.h"
#include "traces/trace.h"

namespace fraglab {

// `history`: the device's trace entries in order, at address level: Alloc (addr, size = requested
// bytes), FreeRequested and Free (free_completed) with the block address, Segment* with the segment
// or range, Oom. Event ids are ignored. `final_segments`: the snapshot's segments for this device.
// `large_page`: an expandable large pool's page (large_segment_size_mb; 20 MiB by default), by which a
// range the history unmapped is told to be the small pool's (not a whole number of large pages).
// `allocated`: where the caller knows that no entry frees an address the history has not allocated before it
// (the importer, having read a recording from the program's start), the addresses the history allocates; the
// scan for blocks whose first entry frees them is then skipped (there are none). `index`: the history's as read
// (traces/formats/pytorch/history_index.h), or null (the history is scanned).
InitialState reconstruct_initial_state(const std::vector<Event>& history,
                                       const std::vector<RecordedSegment>& final_segments,
                                       uint64_t large_page = 20ull << 20, const AddrMap* allocated = nullptr,
                                       const HistoryIndex* index = nullptr);

}  // namespace fraglab
