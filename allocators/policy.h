// The policy interface: an allocator strategy under study.
//
// A policy turns requests into blocks of device memory it obtained through the
// Device interface (device/device.h), and nothing else: it never sees whether the
// device is simulated or a real GPU. The replay engine, not the policy, keeps track
// of which blocks are live and where, so metrics and block maps work for every policy.
//
// Modelled on RMM's device_memory_resource: a small interface; behaviour comes from
// composing policies and device adaptors, not from flags.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "allocators/policy_options.h"
#include "device/device.h"
#include "device/limiting_device.h"
#include "traces/trace.h"

namespace fraglab {

// The id of a request that is tried and given back at once: a recorded OOM replayed as a what-if
// (its lifetime is unknown). Offline planners have no plan for it and decline.
constexpr AllocId kTransientRequest = UINT32_MAX;

struct AllocRequest {
  AllocId id;            // the trace's allocation id (dense; reused after the block is freed)
  uint64_t size;         // requested bytes, as the program asked
  StreamIndex stream;    // the stream the block is allocated on
  uint64_t event_index;  // position in the trace (unique per allocation; offline planners key on it)
  PoolIndex pool = 0;    // the recording allocator's pool (TraceMeta::pools; 0 = the default pools)
};

// A block handed out by a policy. `handle` is the policy's own (an index into its
// tables, say): the engine hands it back on free so policies need no address lookup.
struct Block {
  Addr addr = 0;
  uint64_t size = 0;  // bytes the block occupies (>= the request)
  uint64_t handle = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;

  // A block of at least req.size bytes, or nullopt when the device cannot supply the
  // memory (after whatever recovery the modelled allocator attempts).
  virtual std::optional<Block> allocate(const AllocRequest& req) = 0;
  // The block is reusable from now (stream-ordered frees arrive when their streams
  // have passed the free: PyTorch's free_completed).
  virtual void deallocate(const Block& block) = 0;
  // The program dropped the block, but reuse must wait for deallocate(). Most policies
  // ignore it; it is here for those that track pending frees.
  virtual void free_requested(const Block& /*block*/) {}
  // Return every cached, wholly free piece of memory to the device.
  virtual void empty_cache() = 0;
  // The owner of private pool `pool` went (a CUDA graph destroyed, a MemPool deleted): a policy that
  // keeps such pools may return the pool's cached memory at the next empty_cache(). Most ignore it.
  virtual void release_pool(PoolIndex /*pool*/) {}
  // The recording allocator's state at the trace's first event (InitialState, traces/trace.h), for
  // histories that began mid-run. A policy that models that allocator recreates it (its segments,
  // cached free blocks and live blocks where they were) and returns the live blocks in prologue order;
  // the default declines, and the engine allocates the prologue through allocate() like any request.
  virtual std::optional<std::vector<Block>> adopt_initial_state(const InitialState& /*state*/) { return std::nullopt; }
  // Whether the policy keeps itself within the device's capacity the way the allocator it models does, so
  // that the device must not refuse first (LimitingDevice::set_enforcing): PyTorch under a memory fraction
  // checks a new segment's size against the fraction, and an expandable segment then maps whole pages, up
  // to part of a page past it, which the GPU grants. Most policies leave the limit to the device.
  virtual bool enforces_capacity() const { return false; }
};

// A harness's step after making `policy` over a stack holding `limiter`.
inline void let_policy_enforce(const Policy& policy, LimitingDevice& limiter) {
  if (policy.enforces_capacity()) limiter.set_enforcing(false);
}

// What a policy is built from.
struct PolicyContext {
  Device& device;
  const PolicyOptions& options;
  const TraceMeta& meta;                       // stream table, recorded allocator settings
  const std::vector<Event>* events = nullptr;  // the whole trace, for offline planners (may be null)
};

}  // namespace fraglab
