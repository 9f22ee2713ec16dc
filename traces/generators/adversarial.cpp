// `fraglab gen adversarial`: allocation patterns that defeat classes of placement policies.
//
// robson: after J. M. Robson, "Worst case fragmentation of first fit and best fit storage
//   allocation strategies" (Computer Journal 20(3), 1977): at level k blocks of size
//   min * 2^k fill the live budget, then every other one is freed; the holes (size
//   min * 2^k, each between two survivors) fit none of the next level's blocks, so any
//   non-moving policy that places by address (first fit, best fit, bestfit with splitting)
//   reserves fresh memory at every level while live bytes stay near the budget.
// buddy: sizes 2^k + align: a binary buddy system rounds each to 2^(k+1), wasting ~50%.
// growth: a buffer reallocated by copy a little larger each time (torch.cat onto a KV cache),
//   with a small long-lived block allocated after each copy, pinning the old hole's edge.
#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

#include "traces/generators/generators.h"

namespace fraglab::gen {

namespace {

void robson(const AdversarialOptions& o, Rng& rng, EventSink& sink) {
  for (int round = 0; round < o.rounds; ++round) {
    std::vector<AllocId> survivors;
    const uint64_t parity = rng.next() & 1;  // which half of each level is freed
    for (uint64_t size = o.min_size; size <= o.max_size; size *= 2) {
      std::vector<AllocId> level;
      // Fill the budget; a small jitter (whole alignment units) keeps seeds apart.
      while (sink.live_bytes() + size <= o.live) {
        uint64_t jitter = o.align * rng.between(0, 3);
        level.push_back(sink.alloc(std::max(o.align, size - std::min(size - o.align, jitter))));
        sink.advance(1);
      }
      if (level.size() < 2) {  // the budget is spent: no level beyond this one fits
        for (AllocId id : level) sink.free(id);
        break;
      }
      for (size_t i = 0; i < level.size(); ++i) {
        if ((i & 1) == parity) {
          sink.free(level[i]);
        } else {
          survivors.push_back(level[i]);
        }
      }
      sink.advance(10);
    }
    for (AllocId id : survivors) sink.free(id);
    sink.advance(100);
  }
}

void buddy(const AdversarialOptions& o, Rng& rng, EventSink& sink) {
  int lo = 0, hi = 0;
  while ((2ull << lo) <= o.min_size) ++lo;
  while ((2ull << hi) <= o.max_size) ++hi;
  std::vector<AllocId> live;
  for (int round = 0; round < o.rounds; ++round) {
    // Fill to the budget, then churn: free a random half, refill.
    for (int phase = 0; phase < 4; ++phase) {
      for (;;) {
        uint64_t size = (1ull << rng.between(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi))) + o.align;
        if (sink.live_bytes() + size > o.live) break;
        live.push_back(sink.alloc(size));
        sink.advance(1);
      }
      for (size_t i = 0; i < live.size();) {
        if (rng.next() & 1) {
          sink.free(live[i]);
          live[i] = live.back();
          live.pop_back();
        } else {
          ++i;
        }
      }
    }
  }
  for (AllocId id : live) sink.free(id);
}

void growth(const AdversarialOptions& o, Rng& rng, EventSink& sink) {
  std::vector<AllocId> pins;
  for (int round = 0; round < o.rounds; ++round) {
    uint64_t size = o.min_size;
    AllocId buffer = sink.alloc(size);
    while (size < o.max_size && sink.live_bytes() + size + o.min_size <= o.live) {
      size += o.min_size * rng.between(1, 2);
      AllocId bigger = sink.alloc(size);  // new buffer first, then copy, then free the old
      sink.free(buffer);
      buffer = bigger;
      pins.push_back(sink.alloc(o.align));
      sink.advance(1);
    }
    sink.free(buffer);
  }
  for (AllocId id : pins) sink.free(id);
}

}  // namespace

void validate(const AdversarialOptions& o) {
  const char* k = "adversarial";
  if (o.pattern != "robson" && o.pattern != "buddy" && o.pattern != "growth")
    throw std::invalid_argument("gen adversarial: --pattern is robson, buddy or growth");
  const auto max = static_cast<uint64_t>(kMaxGenBytes);
  check_option(k, "--align", o.align, uint64_t{1}, max);
  check_option(k, "--min-size", o.min_size, o.align, max);
  check_option(k, "--max-size", o.max_size, o.min_size, max);
  check_option(k, "--live", o.live, o.max_size, max);
  check_option(k, "--rounds", o.rounds, 1, 1 << 16);
  // Each round allocates up to live / min-size blocks (robson's first level, buddy's smallest
  // sizes, growth's steps): bound the work, not only each number.
  const double blocks = static_cast<double>(o.rounds) * static_cast<double>(o.live) / static_cast<double>(o.min_size);
  if (blocks > 0x1p30)
    throw std::invalid_argument(fmt::format(
        "gen adversarial: --rounds x --live / --min-size is {:.3g} blocks, more than 2^30: raise --min-size or "
        "lower --live or --rounds",
        blocks));
}

void generate_adversarial(const AdversarialOptions& o, uint64_t seed, EventSink& sink) {
  validate(o);
  Rng rng(seed);
  if (o.pattern == "robson")
    robson(o, rng, sink);
  else if (o.pattern == "buddy")
    buddy(o, rng, sink);
  else
    growth(o, rng, sink);
  sink.flush();
}

}  // namespace fraglab::gen
