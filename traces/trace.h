// The trace model: what a recorded or synthetic GPU allocation history holds.
//
// A trace is a flat stream of fixed-size events. Replay events (alloc, free,
// empty_cache) drive a policy; reference events (the recording allocator's own
// segment and page calls, OOMs, free_requested) are carried along for fidelity
// checks and display, and the replay engine skips them.
//
// Allocation ids are *slots*: the smallest id not live at the time of the alloc.
// Every reader and generator assigns them that way (IdSlots below), so ids stay
// dense (bounded by the peak number of live allocations) and the engine indexes
// plain vectors with them, even on traces of 100M events. The event index of an
// alloc is its unique identity over the whole trace.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fraglab {

using Addr = uint64_t;
using AllocId = uint32_t;
using StreamIndex = uint16_t;   // index into TraceMeta::streams
using StackId = uint32_t;       // index into TraceMeta::stacks; 0 = no stack recorded
using PoolIndex = uint16_t;     // index into TraceMeta::pools; 0 = the default pools
using ContextIndex = uint16_t;  // 1 + index into TraceMeta::compile_contexts; 0 = none

enum class EventKind : uint8_t {
  // Replay events: the engine hands these to the policy.
  Alloc = 0,       // id, size (requested bytes), stream, stack
  Free = 1,        // id: the block is reusable from here (PyTorch's free_completed)
  EmptyCache = 2,  // the program released the allocator's cache (torch.cuda.empty_cache)
  // Reference events: what the recording allocator did; replay skips them.
  FreeRequested = 3,  // id: the program dropped the block; reuse waits for Free (stream events)
  SegmentAlloc = 4,   // addr, size: cudaMalloc of a segment
  SegmentFree = 5,    // addr, size: cudaFree of a segment
  SegmentMap = 6,     // addr, size: physical pages mapped into a reserved range
  SegmentUnmap = 7,   // addr, size: pages unmapped
  Oom = 8,            // size: the recording allocator reported out of memory
  // Replay event: the owner of private pool `pool` went (a CUDA graph destroyed, a torch.cuda.MemPool
  // deleted: PyTorch's releasePool brought its use count to 0), so the next empty_cache may return the
  // pool's cached segments. Inferred from the history (traces/formats/pytorch/pool_inference.h); snapshots record none.
  PoolRelease = 9,
};
constexpr int kEventKindCount = 10;

const char* event_kind_name(EventKind kind);
bool parse_event_kind(const std::string& name, EventKind& kind);

inline bool is_replay_event(EventKind k) { return k <= EventKind::EmptyCache || k == EventKind::PoolRelease; }
inline bool is_device_event(EventKind k) { return k >= EventKind::SegmentAlloc && k <= EventKind::SegmentUnmap; }

struct Event {
  EventKind kind = EventKind::Alloc;
  StreamIndex stream = 0;
  AllocId id = 0;
  uint64_t size = 0;  // requested bytes for Alloc; segment/page bytes for device events
  Addr addr = 0;      // recorded address (device events; recorded block address for Alloc)
  int64_t time_us = 0;
  StackId stack = 0;
  // The allocator pool the request went to (Alloc, Oom) or that was released (PoolRelease): 0 is the
  // default pools, others a CUDA graph's or MemPool's private pool (TraceMeta::pools). It sits in what
  // was padding, so events stay 40 bytes.
  PoolIndex pool = 0;
  // The torch.compile region the entry was made in (a snapshot recorded with compile_context=True:
  // "Torch-Compiled Region: 0/0"); 0 where none was recorded. Also in what was padding.
  ContextIndex compile_context = 0;

  bool operator==(const Event&) const = default;
};
static_assert(sizeof(Event) == 40, "events are 40 bytes; the trace model keeps millions of them");

struct StackFrame {
  std::string name, filename;
  int64_t line = 0;
  bool operator==(const StackFrame&) const = default;
};

// A block of a recorded segment, as a PyTorch snapshot's `segments` lists it at the
// moment the snapshot was taken (the end of the trace).
struct RecordedBlock {
  enum class State : uint8_t { Inactive, ActiveAllocated, ActivePendingFree };
  Addr address = 0;
  uint64_t size = 0, requested_size = 0;
  State state = State::Inactive;
  StackId stack = 0;
  bool operator==(const RecordedBlock&) const = default;
};

// A device segment of the recording allocator at the end of the trace (snapshot `segments`).
struct RecordedSegment {
  Addr address = 0;
  uint64_t total_size = 0, allocated_size = 0, active_size = 0, requested_size = 0;
  StreamIndex stream = 0;
  bool small_pool = false;     // segment_type "small" (PyTorch's small pool)
  bool is_expandable = false;  // an expandable (virtual-memory) segment
  // segment_pool_id: (0, 0) is the default pools; a CUDA graph's or torch.cuda.MemPool's private pool else.
  std::array<int64_t, 2> pool_id{0, 0};
  std::vector<RecordedBlock> blocks;
  bool operator==(const RecordedSegment&) const = default;
};

// The recording allocator's state when the trace's first event happened. Users' snapshots rarely
// start at process start: recording began after the model was built, or the ring buffer of
// _record_memory_history(max_entries=N) wrapped. The state then is reconstructed from the snapshot's
// final `segments` and its history (traces/formats/pytorch/initial_state.h):
//  - `segments`: every segment (for expandable segments: every mapped range) that existed, with the
//    blocks that were live in it (ActiveAllocated; ActivePendingFree for a block whose free was
//    requested but not completed). Space between live blocks was cached free memory: PyTorch never
//    keeps two free blocks side by side, so each gap is one free block.
//  - A live block's `size` is 0 when neither the history nor the final segments show where it ended;
//    the replaying model then estimates it from its own rounding rules (docs/snapshots.md).
//  - The trace's first `live_blocks` events are Alloc events of exactly these live blocks, in the
//    order of `segments` and their blocks (the prologue). A policy that can adopt the state (the
//    pytorch model) places them where they were; every other policy allocates them, in that order
//    (address order), before the history replays.
struct InitialState {
  std::vector<RecordedSegment> segments;
  uint64_t live_blocks = 0;         // prologue length
  uint64_t estimated_requests = 0;  // live blocks whose requested size is unknown (taken as their block size)
  uint64_t unplaced_frees = 0;      // frees of blocks that lie in no segment the snapshot shows (dropped)
  bool empty() const { return segments.empty() && live_blocks == 0; }
  uint64_t reserved() const;  // bytes of segments (mapped ranges) then
  bool operator==(const InitialState&) const = default;
};

constexpr size_t kMaxStreamIndex = UINT16_MAX;
struct TooManyStreams : std::length_error {
  TooManyStreams() : std::length_error("more than 65,536 distinct streams (events hold a 16-bit stream index)") {}
};

// A memory pool of the recording allocator. PyTorch names pools by MempoolId_t: (0, 0) is the
// default pools; CUDA graph captures take (N, 0), torch.cuda.MemPool and graph_pool_handle() (0, N).
// A pool no recording names but the history tells apart (traces/formats/pytorch/pool_inference.h) gets id (-1, k).
struct PoolInfo {
  std::array<int64_t, 2> id{0, 0};
  // How a torch.cuda.MemPool was made (PyTorch 2.11's MemPool(allocator, use_on_oom, no_split)); a
  // snapshot records none of it, so the history tells (traces/formats/pytorch/pool_inference.h):
  //  - own_allocator: MemPool(allocator=...) (a CUDAPluggableAllocator, NCCL's ncclMemAlloc): its segments
  //    come from the allocator's raw_alloc, never as expandable segments;
  //  - use_on_oom: MemPool(use_on_oom=True): malloc serves a default-pool request from its cached blocks when
  //    no segment can be had (try_mempool_fallback);
  //  - no_split: MemPool(no_split=True): its blocks are never split (setNoSplit, should_split);
  //  - empties_on_release: a MemPool, whose destructor empties the pool's cache right after releasePool
  //    (~MemPool: emptyCache(id), which returns that pool's cached segments alone), where a CUDA graph's
  //    reset only releases its pool (the next empty_cache returns it).
  bool own_allocator = false, use_on_oom = false, no_split = false, empties_on_release = false;
  bool is_default() const { return id[0] == 0 && id[1] == 0; }
  bool inferred() const { return id[0] == -1; }
  bool operator==(const PoolInfo&) const = default;
};
// How reports name a pool: "default", "(1, 0)" (the recorded MempoolId) or "inferred #k".
std::string pool_name(const PoolInfo& pool);
// The MemPool arguments inferred for it, as reports list them: "allocator, no_split", or "".
std::string pool_traits(const PoolInfo& pool);
// Whose the pool is by its id: "graph capture" ((N, 0)), "MemPool or graph_pool_handle" ((0, N)),
// "told apart by the model" (inferred); "" for the default pools.
const char* pool_origin(const PoolInfo& pool);

// A region the program marked while the history recorded (a snapshot's `external_annotations`: PyTorch's
// RecordFunction ranges such as "Optimizer.step#AdamW.step", "Optimizer.zero_grad#...", "ProfilerStep#N"):
// its START or END, on the trace's clock. They tell the program's steps and phases apart.
// A history entry with action `annotate` (a later PyTorch's memory annotations) is a point in time, not a
// range: `mark` is set (and `start` is false).
struct Annotation {
  int64_t time_us = 0;
  bool start = true;
  std::string name;
  bool mark = false;
  bool operator==(const Annotation&) const = default;
};

// A kind of history entry the recording left out (`_record_memory_history(skip_actions=[...])`, PyTorch
// 2.11), found from the data (the snapshot does not record skip_actions): one kind never appears while its
// counterpart does. `reading` says how the history is read without it and what that costs.
struct SkippedAction {
  std::string action;  // PyTorch's name: "free_completed", "alloc", "segment_alloc", ...
  std::string reading;
  bool operator==(const SkippedAction&) const = default;
};

// Pinned host memory (PyTorch 2.14's `host_segments` and `host_traces`, recorded with
// `_record_memory_history(record_pinned_host_memory=True)`): the CachingHostAllocator's blocks, summarised
// for reports, not replayed (no device memory).
struct HostMemory {
  uint64_t segments = 0;       // host_segments items
  uint64_t reserved = 0;       // their total_size
  uint64_t allocated = 0;      // their allocated_size (or their allocated blocks)
  uint64_t trace_entries = 0;  // host_traces items
  uint64_t allocs = 0, frees = 0, segment_allocs = 0, segment_frees = 0;
  uint64_t peak_allocated = 0;  // over host_traces: allocs less frees, from the state they imply at the start
  uint64_t peak_reserved = 0;   // the same for segment_alloc / segment_free
  bool present() const { return segments || trace_entries; }
  bool operator==(const HostMemory&) const = default;
};

// Everything about a trace that is not an event.
struct TraceMeta {
  std::string source;  // where the trace came from (file name, generator command)
  std::string format;  // "pytorch-snapshot", "native", "jsonl", "generated", ...
  int device = 0;
  // A snapshot of several GPUs: each GPU holding a history or segments, with what it holds ("909 entries",
  // "segments only"), so a viewer can offer the others. Empty where the snapshot holds one GPU's data.
  std::vector<std::pair<int, std::string>> devices_with_data;
  // Stream handles as recorded (PyTorch's cudaStream_t values); events refer to them by index.
  std::vector<uint64_t> streams{0};
  // The recording allocator's settings, e.g. {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
  // "max_split_size": "-1", ...}. Policies that model that allocator start from them.
  std::map<std::string, std::string> allocator_settings;
  // The snapshot recorded no settings, and allocator_settings holds those the model inferred from the
  // recording allocator's behaviour (traces/formats/pytorch/unrecorded_settings.h), as a snapshot would record them.
  bool settings_inferred = false;
  // Interned stack traces; stacks[0] is the empty stack.
  std::vector<std::vector<StackFrame>> stacks{{}};
  // Frees of blocks allocated before recording started (their allocs are not in the trace).
  uint64_t dropped_unknown_frees = 0;
  // Entries of an earlier, larger ring that PyTorch kept when the history's ring was made smaller while it
  // recorded (PyTorch snapshots only): out of time order, dropped.
  uint64_t dropped_stale_entries = 0;
  // Frees of a block the history had freed already, with no allocation at its address between (PyTorch
  // snapshots: a damaged history; dropped, and `info` and `fidelity` say so). Not kept by the writers.
  uint64_t double_frees = 0;
  // The recording allocator's segments when the trace ended (PyTorch snapshots only).
  std::vector<RecordedSegment> segments;
  // The state at the first event, when the history began mid-run (empty for a history from process start).
  InitialState initial;
  // False when the recording carries no timestamps (PyTorch before about 2.1): times are unknown, not 0.
  bool has_times = true;
  // The snapshot had no history at all (segments only): the trace is its prologue alone.
  bool history_absent = false;
  // Snapshot data read but kept out of device replay, by key with its item count: pinned host memory
  // (`host_segments`, `host_traces`), `external_annotations`, trace entries carrying `user_metadata`.
  std::vector<std::pair<std::string, uint64_t>> unreplayed;
  // The pools events name (Event::pool); pools[0] is the default pools. A trace without private
  // pools has just that one.
  std::vector<PoolInfo> pools{PoolInfo{}};
  // The recording's limit was the GPU's own memory, not a memory fraction, where no OOM entry says so:
  // inferred at import when only that reading reproduces the allocator's retries (sim/capacity.h). The
  // pytorch policy's limit=auto reads it, as it reads OOM entries.
  bool gpu_limit = false;
  // The GPU's memory (cudaDeviceProp::totalGlobalMem), where the import told it by replay: a snapshot does
  // not record it, yet each expandable segment's address range is sized by it, and which free block PyTorch
  // takes can depend on how much unmapped range follows a block (get_free_block's expandable_size). 0: not
  // told; the pytorch policy then takes the least known GPU that holds the recording's maps.
  uint64_t gpu_total_memory = 0;
  // Where the history ran under the other expandable_segments setting than allocator_settings' (a program
  // that called torch.cuda.memory._set_allocator_settings mid-run): ranges [first, end) of Alloc events,
  // by their ordinal among the trace's Alloc events (inserted PoolRelease or EmptyCache events move no
  // range). Inferred at import from the device calls (traces/formats/pytorch/settings_inference.h); empty when none
  // contradicts the recorded setting.
  std::vector<std::pair<uint64_t, uint64_t>> expandable_flipped;
  // The program's marked regions, by time (snapshots' external_annotations of this device, and the history's
  // `annotate` entries).
  std::vector<Annotation> annotations;
  // Kinds of history entries the recording skipped (skip_actions), with how the history is read without them.
  std::vector<SkippedAction> skipped_actions;
  // Pinned host memory the snapshot holds (PyTorch 2.14): reported, not replayed.
  HostMemory host;
  // The compile contexts events name (Event::compile_context k is compile_contexts[k - 1]), each once
  // (readers intern them with traces/context_interner.h).
  std::vector<std::string> compile_contexts;

  // The event's compile context, or nullptr where it has none.
  const std::string* compile_context_of(const Event& e) const {
    return e.compile_context && e.compile_context <= compile_contexts.size() ? &compile_contexts[e.compile_context - 1]
                                                                             : nullptr;
  }

  // Throws TooManyStreams past kMaxStreamIndex + 1 streams (readers add their position).
  // intern_stream scans the table (a trace has a few streams); a reader that meets many keeps a
  // hash index (traces/stream_interner.h) and appends the handles it knows are new.
  StreamIndex intern_stream(uint64_t handle);
  StreamIndex append_stream(uint64_t handle);
  bool operator==(const TraceMeta&) const = default;
};

// A whole trace in memory. Streaming readers (EventSource) exist for long traces.
struct Trace {
  TraceMeta meta;
  std::vector<Event> events;
  bool operator==(const Trace&) const = default;
};

// Pull-based event stream: every format reader implements it, so the replay engine
// streams traces of any length without loading them whole.
class EventSource {
 public:
  virtual ~EventSource() = default;
  virtual const TraceMeta& meta() const = 0;
  // Fills up to out.size() events; returns how many (0 at the end). Throws FormatError.
  virtual size_t read(Event* out, size_t capacity) = 0;
  // The zero-copy form of read(), for sources that hold their events in memory: sets `n` to
  // up to `capacity` next events and returns where they lie (valid until the next call), or
  // returns nullptr, consuming nothing, when the source has no such storage (then use read()).
  virtual const Event* read_in_place(size_t capacity, size_t& n) {
    (void)capacity;
    n = 0;
    return nullptr;
  }
  // Starts again from the first event (a second replay pass). Sources that cannot rewind
  // return false.
  virtual bool rewind() = 0;
};

// An EventSource over a Trace held in memory.
class MemorySource final : public EventSource {
 public:
  explicit MemorySource(const Trace& trace) : trace_(trace) {}
  const TraceMeta& meta() const override { return trace_.meta; }
  size_t read(Event* out, size_t capacity) override;
  const Event* read_in_place(size_t capacity, size_t& n) override;
  bool rewind() override {
    pos_ = 0;
    return true;
  }

 private:
  const Trace& trace_;
  size_t pos_ = 0;
};

// Assigns dense allocation ids: the lowest id not currently live.
class IdSlots {
 public:
  AllocId acquire();
  void release(AllocId id);
  size_t capacity() const { return live_.size(); }
  bool is_live(AllocId id) const { return id < live_.size() && live_[id]; }

 private:
  std::vector<bool> live_;
  std::vector<AllocId> free_heap_;  // min-heap of released ids
};

}  // namespace fraglab
