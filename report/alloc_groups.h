// Allocations grouped three ways: by call site, by size class and by stream.
//
// What `fraglab diff` compares between two runs and what `fraglab diagnose` attributes
// stranded bytes to. A call site is the innermost frame outside PyTorch (traces/alloc_site.h);
// a size class is a power-of-two interval of the requested size; a stream is named by its
// order of first use in the trace (handles differ between processes; the order does not).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

enum class GroupBy { Site, SizeClass, Stream, Category };

struct AllocGroup {
  std::string key;
  uint64_t allocs = 0;        // allocations over the trace
  uint64_t bytes = 0;         // requested bytes over the trace
  uint64_t live_at_peak = 0;  // requested bytes live when the trace's live bytes peaked
};

// Labels of one allocation under each grouping.
class GroupLabels {
 public:
  explicit GroupLabels(const TraceMeta& meta);
  std::string label(GroupBy by, const Event& alloc) const;
  bool has_stacks() const { return has_stacks_; }

 private:
  const TraceMeta& meta_;
  std::vector<std::string> site_of_stack_;
  bool has_stacks_ = false;
};

// "[1 MiB, 2 MiB)": the power-of-two interval holding `bytes` ("[0 B, 1 B)" for 0).
std::string size_class_label(uint64_t bytes);
// "stream 1 (0x7f3a...)": the stream by its index in the trace's stream table.
std::string stream_label(const TraceMeta& meta, StreamIndex stream);

struct AllocBreakdown {
  std::vector<AllocGroup> by_site, by_size_class, by_stream;  // each sorted by bytes, largest first
  // By what the memory is to the program (parameters, activations, ...: report/program_attribution.h).
  std::vector<AllocGroup> by_category;
  bool has_stacks = false;
  const std::vector<AllocGroup>& of(GroupBy by) const;
};

// One pass over the trace's allocations and frees; `peak_live_index` is the event at which
// live requested bytes peak (TraceStats::peak_live_index).
AllocBreakdown break_down(const Trace& trace, uint64_t peak_live_index);

}  // namespace fraglab
