// Synthetic traces for the GUI tests: deterministic, many size classes, interleaved
// lifetimes so that best-fit policies leave holes (what a block map must show).
#pragma once

#include <random>

#include "traces/trace.h"

namespace fraglab::test {

inline Trace make_fragmenting_trace(size_t allocs, uint32_t seed = 7) {
  Trace t;
  t.meta.source = "gui test";
  t.meta.format = "generated";
  t.meta.stacks.push_back({{"forward", "model.py", 10}});
  t.meta.stacks.push_back({{"empty", "/x/site-packages/torch/functional.py", 5}, {"step", "train.py", 42}});
  std::mt19937_64 rng(seed);
  IdSlots slots;
  std::vector<AllocId> live;
  int64_t time = 0;
  auto free_one = [&](size_t k) {
    AllocId id = live[k];
    live[k] = live.back();
    live.pop_back();
    t.events.push_back({EventKind::Free, 0, id, 0, 0, time += 3, 0});
    slots.release(id);
  };
  for (size_t i = 0; i < allocs; ++i) {
    // Sizes from 512 B to 256 MiB, log-uniform: every size class of the block map.
    uint64_t size = uint64_t{512} << (rng() % 20);
    size += (rng() % 8) * (size / 8);
    AllocId id = slots.acquire();
    live.push_back(id);
    t.events.push_back({EventKind::Alloc, 0, id, size, 0, time += 5, static_cast<StackId>(1 + rng() % 2)});
    if (live.size() > 40 && rng() % 3 != 0) free_one(rng() % live.size());
  }
  while (live.size() > 20) free_one(rng() % live.size());
  return t;
}

}  // namespace fraglab::test
