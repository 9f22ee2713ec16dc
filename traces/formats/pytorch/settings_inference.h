// Where a PyTorch snapshot's history ran under the other expandable_segments setting.
//
// A snapshot records the allocator's settings once, as they were when it was taken; a program may
// have changed them before: `torch.cuda.memory._set_allocator_settings("expandable_segments:...")`
// (NeMo's dataloader turns expandable segments on after the model is built; vLLM's sleep-mode
// allocator turns them off for the span of its MemPool and on again after). PyTorch reads the
// setting at every request (CUDAAllocatorConfig::expandable_segments() in alloc_block, get_free_block
// and should_split), and the history has no entry for the change. The device calls that served the
// requests show it: a new mapping (segment_map) is made only with expandable segments on, a cudaMalloc
// (segment_alloc) for a pool without an allocator of its own only with them off.
//
// The windows run from the first request whose device call shows the other setting to the first
// that shows the recorded one again (a setting holds until a device call says otherwise; before the
// first such call, the first call's setting held). Requests served from the cache show nothing.
#pragma once

#include <algorithm>
#include <functional>
#include <iterator>
#include <optional>

#include "traces/formats/pytorch/history_index.h"
#include "traces/formats/pytorch/snapshot_model.h"
#include "traces/trace.h"

namespace fraglab {

// Sets trace.meta.expandable_flipped from the trace's events: the Alloc and Oom events' pools (where
// inferred) exclude MemPools with an allocator of its own, whose segments are cudaMalloc-style either
// way; before the pools are inferred, segments the snapshot still holds in a private pool are left out.
//
// Where the model has a divergence finder (SnapshotModel::find_divergence), a change the device calls place only within
// a span of requests is moved to the first request of the span the model's replay disagrees at (a few rounds).
// `index`: the importer's count of each kind of the history's entries (traces/formats/pytorch/history_index.h),
// or null: a trace whose device calls are all of the recorded setting's kind (no segment_map under the default,
// no cudaMalloc'd segment under expandable segments) shows nothing of the other setting, without a scan.
void infer_expandable_switches(Trace& trace, const SnapshotModel& model, const HistoryIndex* index = nullptr);

// TraceMeta::expandable_flipped as ranges [begin, end) of indexes into `events`: each Alloc event of a
// flipped range with the device calls and other entries since the Alloc before it.
std::vector<std::pair<uint64_t, uint64_t>> flipped_event_ranges(
    const std::vector<Event>& events, const std::vector<std::pair<uint64_t, uint64_t>>& flipped);

// Whether `index` lies in one of `ranges` (ascending, disjoint, each [begin, end)): one binary search.
inline bool in_ranges(const std::vector<std::pair<uint64_t, uint64_t>>& ranges, uint64_t index) {
  auto next = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(index, UINT64_MAX));
  return next != ranges.begin() && index < std::prev(next)->second;
}

// The model's first disagreement (SnapshotModel::find_divergence): nothing where it has no finder or
// cannot replay the trace.
std::optional<uint64_t> first_divergence(const Trace& trace, const SnapshotModel& model);
// The same where the model has a finder, but a trace the model cannot replay disagrees at its start (and
// without a finder every trace does): for a search among readings, where nothing must mean exact.
std::optional<uint64_t> first_divergence_or_start(const Trace& trace, const SnapshotModel& model);
// How far the model follows the trace as read: the events before its first disagreement
// (2^64-1 where it agrees throughout), the measure by which readings of a trace are compared.
inline uint64_t agreement(const Trace& trace, const SnapshotModel& model) {
  return first_divergence(trace, model).value_or(UINT64_MAX);
}

// The recorded expandable_segments setting (allocator_settings' parsed value, else the settings text).
bool recorded_expandable(const TraceMeta& meta);
// The recorded large_segment_size_mb (PyTorch 2.11; the snapshot records it only in the settings text) in
// bytes: an expandable large pool's page, the segment of a 1-10 MiB request. 20 MiB where none is set.
// The key "large_segment_size" (bytes), which PyTorch never writes, holds the size the device calls show
// where the text does not name it (note_large_segment_size) and comes first.
uint64_t recorded_large_segment_size(const TraceMeta& meta);
inline constexpr const char* kNotedLargeSegmentSize = "large_segment_size";
// The large segment size lives on past the settings text that set it: a later
// torch.cuda.memory._set_allocator_settings replaces the text the snapshot records (parseArgs overwrites
// last_allocator_settings_) but resets only max_split_size, rounding and the collector. A cudaMalloc
// made for a request of 1 to 8 MiB (`history` at address level: the segment_alloc entry, then the alloc at
// its address) is exactly that size: where such calls agree on a size the text does not give, it is
// noted as allocator_settings["large_segment_size"].
// `index`: the history's as read (traces/formats/pytorch/history_index.h), or null (the history is scanned).
void note_large_segment_size(TraceMeta& meta, const std::vector<Event>& history, const HistoryIndex* index = nullptr);

}  // namespace fraglab
