// A loaded trace with what the views derive from it once: summary statistics, each
// allocation's free event (block lifetimes in tooltips) and allocation sites.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "traces/alloc_site.h"
#include "traces/trace.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

namespace fraglab::gui {

// Where allocations come from: the innermost stack frame outside PyTorch's own code
// (frames in the installed torch package and C++ frames are the allocator and tensor
// plumbing; the first frame past them is the model or library line that asked for memory).
struct AllocSite {
  std::string label;  // "name  file:line", or "(no stack recorded)"
  uint64_t bytes = 0, count = 0;
  bool recorded = true;  // false for the site of allocations without a stack
};

struct TraceInfo {
  std::string path;
  Trace trace;
  TraceStats stats;
  // For an Alloc event, the index of its Free (kNever when never freed); other events: kNever.
  static constexpr uint64_t kNever = UINT64_MAX;
  std::vector<uint64_t> free_index;
  // For an Alloc event, what the memory is to the program (MemoryCategory: parameters, activations, ...,
  // report/program_attribution.h); other events: kNoCategory.
  static constexpr uint8_t kNoCategory = UINT8_MAX;
  std::vector<uint8_t> categories;
  // Where the program's steps begin (event indices, the first 0): ProgramAttribution's (the snapshot's
  // ProfilerStep / Optimizer.step annotations, else the phases of the stacks, else live-bytes hysteresis).
  std::vector<uint64_t> steps{0};
  // Sites ordered by bytes allocated, largest first; site_of_stack maps a StackId to one.
  std::vector<AllocSite> sites;
  std::vector<uint32_t> site_of_stack;
  bool has_stacks = false;
  bool recorded_layout = false;  // block addresses and segment calls recorded (gui/model/recorded_run.h)
  bool pools_pending = false;    // its pools await the model's check (load_trace_info), which AppState runs
  // The limit a recording ran under, inferred from its OOMs and retries as the CLI infers it (capacity_for),
  // which policies replay under when no --capacity is given; the note says how it was read.
  std::optional<uint64_t> inferred_capacity;
  std::string capacity_note;

  // One past the last allocation or free: later events are the program's exit (segment frees, empty_cache).
  uint64_t program_end = 0;

  uint64_t events() const { return trace.events.size(); }
  int64_t time_at(uint64_t index) const;
  // The first event at or after time t (times are recorded in order).
  uint64_t index_at_time(int64_t t) const;
  uint32_t site_of(const Event& e) const { return e.stack < site_of_stack.size() ? site_of_stack[e.stack] : 0; }
  // The site's rank among sites with a recorded stack (its color), -1 for the no-stack site and for sites
  // that allocated nothing (stacks of frees or OOMs alone): colors go to sites that hold memory.
  int color_slot(uint32_t site) const {
    if (site >= sites.size() || !sites[site].recorded || sites[site].bytes == 0) return -1;
    return static_cast<int>(site) - (no_stack_site < site ? 1 : 0);
  }
  uint32_t no_stack_site = 0;
};

// Derives everything from a trace already in memory.
std::shared_ptr<const TraceInfo> make_trace_info(Trace trace, std::string path);
// Reads a trace file of any supported format; throws FormatError (or std::exception) on bad input.
// `defer_pool_check`: a snapshot's pools may await the model's check (ReadOptions::defer_pool_check;
// then pools_pending is set and pools_confirmed(info->trace) runs it).
// `device`: the GPU whose history a snapshot is read for (kAnyDevice: device 0, or the only one with data).
std::shared_ptr<const TraceInfo> load_trace_info(const std::string& path, bool defer_pool_check = false,
                                                 int device = kAnyDevice);

// The label of a stack's allocation site (see AllocSite; traces/alloc_site.h).
using fraglab::site_label;

}  // namespace fraglab::gui
