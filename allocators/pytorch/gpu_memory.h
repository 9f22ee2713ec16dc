// The GPU's memory (cudaDeviceProp::totalGlobalMem) a recording was made on, as far as the recording
// shows it. PyTorch sizes each expandable segment's address range by it (ExpandableSegment reserves
// max_handles_ pages for 1 1/8 of it) and memory fractions are fractions of it, yet a snapshot does not
// record it: where a program's expandable segments reach further than the assumed GPU's range, the model
// ran out of address space where PyTorch did not and began a new segment (a real Lightning run on an
// H200 under expandable_segments:True,max_split_size_mb:128 mapped pages 139 GiB into one segment's
// range, 149 GB reserved at most; an H100's range is 89 GiB).
#pragma once

#include <cstdint>
#include <vector>

#include "allocators/pytorch/caching_allocator.h"
#include "traces/trace.h"

namespace fraglab::detail {

// The GPUs whose totalGlobalMem is known, as torch 2.11 reports them (torch.cuda.get_device_properties:
// the corpus's and tests/data's stats.jsonl), ascending: H100 80GB HBM3, H200.
inline constexpr uint64_t kKnownGpuTotals[] = {kH100TotalMemory, 150109880320ull};

// The known GPU with exactly `total` bytes, by name ("H100 80GB", "H200"); "" for any other.
constexpr const char* known_gpu_name(uint64_t total) {
  return total == kKnownGpuTotals[0] ? "H100 80GB" : total == kKnownGpuTotals[1] ? "H200" : "";
}

// The least known GPU with at least `bound` bytes; past them all, `bound` rounded up to a GiB.
uint64_t gpu_total_memory_at_least(uint64_t bound);

// The address range of an expandable segment with pages of `page` bytes on a GPU of `total` bytes:
// ExpandableSegment's max_handles_ = numSegments(totalGlobalMem + totalGlobalMem / 8) pages.
constexpr uint64_t expandable_range_size(uint64_t total, uint64_t page) {
  return (total + total / 8 + page - 1) / page * page;
}

// The least known GPU total, at least `least`, under which every expandable range the recording maps
// (`initial`'s, then the events' segment_map calls) lies inside one segment's range. A range starts where a
// map lies outside every range found so far (as HintedDevice places them); a map that runs past its
// range's end shows a larger GPU. `least` where nothing is mapped; the largest known (or `least`) where
// none holds them all (a GPU larger than any known).
uint64_t gpu_total_memory_for_maps(const std::vector<Event>& events, const InitialState& initial, uint64_t least);

// The GPU the pytorch policy assumes for a trace with expandable segments: the one the import told by replay
// (TraceMeta::gpu_total_memory), at least `least`; else gpu_total_memory_for_maps of `events` (`least` without).
uint64_t gpu_total_memory_for(const std::vector<Event>* events, const TraceMeta& meta, uint64_t least);

}  // namespace fraglab::detail
