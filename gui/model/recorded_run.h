// The recording as a lane: what the recording allocator itself did, read straight from the
// trace, so the views can show PyTorch's own blocks at their recorded addresses before
// anyone asks what another policy would do.
//
// A snapshot's trace entries carry each block's address and the allocator's own segment
// calls (cudaMalloc/cudaFree, page map/unmap of expandable segments); its initial state
// (traces/formats/pytorch/initial_state.h) gives the segments that existed before the history began. A
// sweep over them rebuilds, at any event, the live blocks and the device regions, with no
// policy model involved. Block sizes: trace entries record the requested size only, so a
// block's size is what PyTorch's allocator gives the request (recorded_block_size below:
// round_size under the recorded settings, and the whole free block where PyTorch does not
// split it), so allocated bytes are PyTorch's allocated_bytes; blocks of the initial state
// have their recorded sizes.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "allocators/pytorch/config.h"
#include "gui/model/policy_run.h"

namespace fraglab::gui {

constexpr const char* kRecordedSpec = "recorded";
inline bool is_recorded_spec(const std::string& spec) { return spec == kRecordedSpec; }

// Whether the trace records where its blocks were (a PyTorch snapshot with segment calls or
// an initial state); otherwise the lane has nothing to show.
bool has_recorded_layout(const Trace& trace);

// The recording's memory, advanced one event at a time.
class RecordedState {
 public:
  struct Block {
    uint64_t size = 0, requested = 0, alloc_index = 0;
    StreamIndex stream = 0;
    PoolIndex pool = 0;
    bool awaiting_streams = false;  // freed by the program, held until the streams that used it are done
  };
  struct Region {
    uint64_t size = 0;
    bool vmm = false;    // mapped pages of an expandable segment (adjacent mappings merge)
    PoolIndex pool = 0;  // a private pool's blocks were seen in it
  };

  // The state before event 0. Without `keep_blocks` only the byte counts and regions are
  // kept (the whole-trace series: no per-block map to update).
  explicit RecordedState(const Trace& trace, bool keep_blocks = true);
  void apply(uint64_t index);  // applies trace.events[index]

  // PyTorch's counters: allocated_bytes drops when the program frees a block (free_requested: the
  // allocator's free()), requested_bytes (as active_bytes) when the block is free again (free_completed:
  // free_block()). Between the two a block used on other streams (record_stream) awaits their events:
  // `awaiting_streams`, in memory and in `requested`, out of `allocated`.
  uint64_t requested = 0, allocated = 0, reserved = 0, awaiting_streams = 0;
  const std::map<Addr, Block>& blocks() const { return blocks_; }
  const std::map<Addr, Region>& regions() const { return regions_; }

 private:
  void add_region(Addr addr, uint64_t size, bool vmm, PoolIndex pool);
  void remove_range(Addr addr, uint64_t size);
  void mark_pool(Addr addr, PoolIndex pool);
  uint64_t block_size(const Event& e) const;

  const Trace& trace_;
  detail::PytorchAllocatorConfig config_;  // the recorded settings (round_size, max_split_size)
  std::map<Addr, uint64_t> large_;         // live blocks of large-pool requests: where a free block ends
  bool keep_blocks_;
  std::map<Addr, Block> blocks_;
  std::vector<std::pair<uint64_t, uint64_t>> size_of_id_;  // live allocation id -> (block, requested) bytes
  std::vector<bool> awaiting_of_id_;                       // live allocation id -> freed, awaiting streams
  std::map<Addr, Region> regions_;
  std::vector<Addr> addr_of_id_;                     // live allocation id -> block address
  std::unordered_map<Addr, uint64_t> initial_size_;  // initial-state blocks' recorded sizes
};

// The block PyTorch's allocator gives a request of `requested` bytes placed at the start of a free
// block of `free_span` bytes (0: unknown; the span up to the next live block or the segment's end):
// round_size() under `config`, or the whole free block where should_split() keeps it whole (a large
// pool's remainder of at most 1 MiB, or a block at or past max_split_size; never in small pools, in
// expandable segments or where the remainder is unknown; always in a no_split pool).
uint64_t recorded_block_size(uint64_t requested, const detail::PytorchAllocatorConfig& config, uint64_t free_span = 0,
                             bool expandable = false, bool no_split = false);

// The whole-trace series, peaks and recorded OOMs of the recording; `progress` as for a
// replay (return false to cancel: then nullptr).
std::unique_ptr<RunResult> recorded_result(const TraceInfo& trace, const std::function<bool(uint64_t)>& progress);

// The memory just after event `event_index`, as the recording had it. Throws
// std::invalid_argument when the trace has no recorded layout.
CursorSnapshot recorded_snapshot(
    const TraceInfo& trace, uint64_t event_index, const std::function<bool()>& cancelled = [] { return false; });

}  // namespace fraglab::gui
