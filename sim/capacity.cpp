#include "sim/capacity.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "allocators/pytorch/caching_allocator.h"
#include "allocators/pytorch/config.h"
#include "allocators/pytorch/limit_drift.h"
#include "sim/fidelity.h"

namespace fraglab {

namespace {

// The limit set_per_process_memory_fraction(f) sets: setMemoryFraction's cast of f x total memory.
uint64_t fraction_limit(double f, uint64_t total) { return static_cast<uint64_t>(f * static_cast<double>(total)); }

// The fraction with the fewest decimals (up to 4) whose limit falls in [low, high].
std::optional<double> simplest_fraction(uint64_t low, uint64_t high, uint64_t total) {
  for (int scale : {10, 100, 1000, 10000})
    for (int k = 1; k <= scale; ++k) {
      double f = static_cast<double>(k) / scale;
      const uint64_t limit = fraction_limit(f, total);
      if (limit >= low && limit <= high) return f;
    }
  return std::nullopt;
}

// The segment size malloc checked against the limit to serve the first request at or after `from`
// (get_allocation_size of round_size under the recorded settings).
uint64_t next_request_segment(const std::vector<Event>& events, size_t from,
                              const detail::PytorchAllocatorConfig& config) {
  for (size_t i = from; i < events.size(); ++i)
    if (events[i].kind == EventKind::Alloc)
      return detail::pytorch_allocation_size(detail::pytorch_round_size(events[i].size, config),
                                             config.large_segment_size);
  return 0;
}

// The recorded settings as the model reads them; nothing where they do not parse.
std::optional<detail::PytorchAllocatorConfig> recorded_config(const TraceMeta& meta) {
  detail::PytorchAllocatorConfig config;
  try {
    config.apply_recorded(meta.allocator_settings);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return config;
}

// garbage_collection_threshold as recorded; 0 when off or not recorded.
double garbage_collection_threshold(const TraceMeta& meta) {
  auto it = meta.allocator_settings.find("garbage_collection_threshold");
  if (it == meta.allocator_settings.end()) return 0;
  const double t = std::strtod(it->second.c_str(), nullptr);
  return t > 0 && t < 1 ? t : 0;
}

}  // namespace

std::optional<InferredCapacity> infer_capacity(const Trace& trace, uint64_t total_memory) {
  if (total_memory == 0)
    total_memory = trace.meta.gpu_total_memory ? trace.meta.gpu_total_memory : detail::kH100TotalMemory;
  InferredCapacity out;
  uint64_t reserved = trace.meta.initial.reserved();
  out.low = reserved;
  out.high = UINT64_MAX;
  uint64_t device_bound = UINT64_MAX;
  // A run of segment releases that malloc follows with a new segment is its recovery after the
  // limit refused the segment (release_available_cached_blocks / release_cached_blocks, then retry):
  // the limit is below the reserved bytes before the run plus that segment. With garbage collection
  // on, the run may instead be garbage_collect_cached_blocks, which malloc calls (only under a memory
  // fraction) when no cached block fits, and which frees only while the reserved bytes exceed the
  // threshold times the limit: then the limit is below the reserved bytes over the threshold. Either
  // way there is a limit, below the larger of the two.
  const double gc = garbage_collection_threshold(trace.meta);
  // Settings that do not parse are the policy's to report, naming the trace; default rounding here.
  const detail::PytorchAllocatorConfig config = recorded_config(trace.meta).value_or(detail::PytorchAllocatorConfig{});
  EventKind previous = EventKind::Alloc;
  bool previous_empties = false;  // the previous event empties a cache: the program's, or a MemPool's destructor's
  bool limit_seen = false;
  uint64_t seen_total = 0;  // the GPU has at least this: an OOM's free device memory plus the bytes reserved
  uint64_t reserved_before_releases = 0;
  std::vector<uint64_t> unmapped_bounds;  // malloc's retries that mapped nothing, read as such: their bounds
  bool in_releases = false;
  bool emptied = false;  // the current run follows an EmptyCache: the program's, not malloc's
  const auto& events = trace.events;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    const bool release = e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentUnmap;
    if (release && !in_releases) reserved_before_releases = reserved, emptied = previous_empties;
    // A run read as malloc's followed by a request with no new pages: under expandable segments the retry
    // found its block mapped already (find_expandable_block), so the fraction refused the first try.
    const bool unmapped_retry = e.kind == EventKind::Alloc && previous == EventKind::SegmentUnmap;
    if (!release && in_releases && !emptied &&
        (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap || unmapped_retry)) {
      if (uint64_t segment = next_request_segment(events, i, config)) {
        uint64_t below = reserved_before_releases + segment - 1;
        // Such a run is as often the program's empty_cache() before its next request: its bound is kept
        // for after the history, where one below what the recording needed shows the run was the program's.
        if (unmapped_retry && gc == 0) {
          unmapped_bounds.push_back(below);
        } else {
          // Had the GPU refused, it refused what the retry then obtained (the same cudaMalloc, or the
          // pages of the same map); a retry that mapped nothing rules the GPU's own limit out (the first
          // try would have found its block).
          out.gpu_high = unmapped_retry ? 0 : std::min(out.gpu_high, reserved_before_releases + e.size - 1);
          if (gc > 0) {
            below =
                std::max(below, static_cast<uint64_t>(std::ceil(static_cast<double>(reserved_before_releases) / gc)));
            ++out.gc_runs;
            out.loose_high = std::max(out.loose_high, below);
          }
          out.high = std::min(out.high, below);
          limit_seen = true;
        }
      }
    }
    if (e.kind != EventKind::Oom) in_releases = release;
    switch (e.kind) {
      case EventKind::SegmentAlloc:
        reserved += e.size;
        out.low = std::max(out.low, reserved);  // reserved + the segment passed the check
        break;
      case EventKind::SegmentMap:
        // An expandable segment checks the request's segment size (not the pages it maps) once, before
        // its first map: reserved then plus that size passed.
        if (previous != EventKind::SegmentMap)
          out.low = std::max(out.low, reserved + next_request_segment(events, i, config));
        reserved += e.size;
        break;
      case EventKind::SegmentFree:
      case EventKind::SegmentUnmap:
        reserved -= std::min(reserved, e.size);
        break;
      case EventKind::Oom: {
        ++out.ooms;
        // e.size is round_size()'s
        const uint64_t segment = detail::pytorch_allocation_size(e.size, config.large_segment_size);
        out.high = std::min(out.high, reserved + segment - 1);
        const uint64_t device_free = e.addr;  // 0: not recorded
        seen_total = std::max(seen_total, reserved + device_free);
        if (device_free != 0 && device_free < segment) {  // the GPU had no room: cudaMalloc failed
          out.device_limit = true;
          device_bound = std::min(device_bound, reserved + device_free);
        }
        break;
      }
      default:
        break;
    }
    out.gpu_low = std::max(out.gpu_low, reserved);
    previous = e.kind;
    previous_empties =
        e.kind == EventKind::EmptyCache || (e.kind == EventKind::PoolRelease && e.pool < trace.meta.pools.size() &&
                                            trace.meta.pools[e.pool].empties_on_release);
  }
  // The retries that mapped nothing: a bound at or above what the recording needed is the fraction's (and
  // rules the GPU's own limit out: under it the first try would have found the block the retry did); one
  // below it was the program's empty_cache() before its next request, which the run-by-run reading turns.
  for (uint64_t below : unmapped_bounds)
    if (below >= out.low) {
      out.high = std::min(out.high, below);
      out.gpu_high = 0;
      limit_seen = true;
    }
  // A larger GPU than assumed (an H200's OOM leaves more free than an H100 has): its fractions.
  if (seen_total > total_memory) total_memory = gpu_total_memory_at_least(seen_total);
  out.total_memory = total_memory;
  // A log that records none of its allocator's device calls (an RMM log) shows no limit's bounds.
  const bool calls_recorded = !trace.meta.initial.empty() || out.low > 0;
  if ((out.ooms == 0 && !limit_seen) || !calls_recorded) return std::nullopt;
  if (out.device_limit) {
    out.bytes = device_bound;
    return out;
  }
  // Without a recorded OOM, only a limit that fits the bounds is evidence enough: a memory fraction, or,
  // with the collector configured (it never runs without a fraction), the GPU's own limit, which
  // capacity_for replays before taking it.
  const bool gpu_reading = out.ooms == 0 && out.gc_runs > 0 && out.low <= out.gpu_high;
  // Without an OOM or the collector, malloc's release-and-retry runs are still a limit's doing where no
  // fraction explains them: the GPU's own, at least the most ever reserved and below what each retry then
  // obtained (a job that filled an H200 under expandable segments, retrying 8 times without an OOM).
  auto retries_reading = [&]() -> std::optional<InferredCapacity> {
    if (out.ooms > 0 || gc > 0 || out.gpu_low > out.gpu_high) return std::nullopt;
    out.retries_only = true;
    out.low = out.gpu_low;
    out.high = out.gpu_high;
    out.bytes = out.gpu_low;
    return out;
  };
  // Contradicting bounds: a release run was not malloc's recovery after all (an empty_cache() right
  // before an allocation, a private pool released), or the limit changed along the run (the program set
  // a fraction again: raised after its OOMs, say). With OOMs to show a limit and no collector (whose
  // releases depend on its exact value), the largest the recording needed is taken, and the pytorch model
  // follows the limit its device calls show along the trace (allocators/pytorch/limit_drift.h).
  if (out.high < out.low && !gpu_reading) {
    // Without an OOM, runs read as the collector's that bound it below what the recording needed: one of them
    // was the program's. The limit lies below the loosest bound if any was the collector's.
    if (out.ooms == 0 && gc > 0 && out.gc_runs > 1 && out.loose_high >= out.low) {
      out.loose = true;
      out.high = out.loose_high;
    } else if (out.ooms == 0 || gc > 0) {
      return retries_reading();
    } else {
      out.changed = true;
      out.bytes = out.low;
      return out;
    }
  }
  if (out.high >= out.low) out.fraction = simplest_fraction(out.low, out.high, total_memory);
  if (out.ooms == 0 && !out.fraction && !gpu_reading) return retries_reading();
  out.bytes = out.fraction ? fraction_limit(*out.fraction, total_memory) : (out.high >= out.low ? out.high : out.low);
  return out;
}

std::string InferredCapacity::describe() const {
  if (device_limit && ooms == 0 && retries_only)
    return fmt::format(
        "capacity {} bytes inferred from the allocator's retries: the GPU's own limit, no memory fraction "
        "(no OOM recorded: the most ever reserved, below what each retry then obtained, bounds it to [{}, {}]; "
        "the model replayed the recording at the least and reproduced every device call; --capacity overrides)",
        bytes, low, gpu_high);
  if (device_limit && ooms == 0)
    return fmt::format(
        "capacity {} bytes inferred from the allocator's retries: the GPU's own limit, no memory fraction "
        "(the recording bounds it to [{}, {}]; with garbage_collection_threshold set, only a limit where the "
        "collector never runs reproduces the retries; --capacity overrides)",
        bytes, low, gpu_high);
  if (device_limit)
    return fmt::format(
        "capacity {} bytes inferred from {} recorded OOM(s): the GPU ran out (reserved + free device "
        "memory at the failure)",
        bytes, ooms);
  if (changed)
    return fmt::format(
        "capacity {} bytes inferred from {} recorded OOM(s) and the allocator's retries: a limit below what "
        "the GPU had free that changed along the run (no one limit fits: the recording bounds it below {} "
        "and needed {}), followed from the device calls; --capacity overrides",
        bytes, ooms, high, low);
  if (fraction)
    return fmt::format(
        "capacity {} bytes inferred from {} recorded OOM(s) and the allocator's {}: "
        "set_per_process_memory_fraction({:g}) of {} bytes (the recording bounds the limit to [{}, {}]; "
        "--capacity overrides)",
        bytes, ooms, gc_runs ? "retries and garbage collection" : "retries", *fraction, total_memory, low, high);
  return fmt::format(
      "capacity {} bytes inferred from {} recorded OOM(s): a limit below what the GPU had free (range "
      "[{}, {}]; --capacity overrides)",
      bytes, ooms, low, high);
}

namespace {

struct Candidate {
  double fraction;
  uint64_t total;  // of this GPU's memory
};

// The fractions (up to four decimals, as simplest_fraction) of each GPU's memory in `totals` whose limit lies
// in [low, high], the roundest first, as people write them: tenths, twentieths, hundredths, two-hundredths,
// and so on. A snapshot does not say which GPU: fractions written with as many decimals go GPU by GPU, in
// `totals`' order (an H100's 0.27 before an H200's 0.15), and fewer decimals on another GPU before more on
// the first (an H200's 0.03 before an H100's 0.0529, the same bytes within 7 MB).
std::vector<Candidate> fractions_within(uint64_t low, uint64_t high, const std::vector<uint64_t>& totals) {
  constexpr int kFinest = 20000;
  // Scales by the decimals their fractions are written with: 0.1; 0.15, 0.27; 0.125, 0.027; 0.0425.
  // (The first group lists tenths twice: the second finds them listed.)
  constexpr std::array<std::array<int, 2>, 4> kByDecimals{{{10, 10}, {20, 100}, {200, 1000}, {2000, 10000}}};
  std::vector<Candidate> out;
  std::vector<std::vector<bool>> listed(totals.size(), std::vector<bool>(kFinest + 1, false));  // by numerator
  for (const auto& scales : kByDecimals)
    for (size_t t = 0; t < totals.size(); ++t)
      for (int scale : scales)
        for (int k = 1; k <= scale; ++k) {
          const int n = k * (kFinest / scale);
          if (listed[t][n]) continue;  // listed already, rounder
          listed[t][n] = true;
          const double f = static_cast<double>(k) / scale;
          const uint64_t limit = fraction_limit(f, totals[t]);
          if (limit >= low && limit <= high) out.push_back({f, totals[t]});
        }
  return out;
}

// The GPU's memory the recording's fraction is of: the one inferred, then the larger known GPUs.
std::vector<uint64_t> totals_from(uint64_t inferred) {
  std::vector<uint64_t> totals{inferred};
  for (uint64_t t : detail::kKnownGpuTotals)
    if (t > inferred) totals.push_back(t);
  return totals;
}

// What the choice depends on: every event the replay reads (the pools as inferred so far included: the
// pool checker asks during its rounds, and a verdict under one round's pools need not hold under the
// next), and the settings.
uint64_t recording_key(const Trace& trace) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
  for (const Event& e : trace.events) {
    mix(static_cast<uint64_t>(e.kind) | uint64_t{e.pool} << 8 | uint64_t{e.stream} << 24);
    mix(e.size);
    mix(e.addr);
    mix(e.id);
  }
  for (const auto& [key, value] : trace.meta.allocator_settings) {
    for (char c : key) mix(static_cast<unsigned char>(c));
    for (char c : value) mix(static_cast<unsigned char>(c));
  }
  mix(trace.meta.initial.reserved());
  return h;
}

// Garbage collection's releases bound the limit only loosely (below the reserved bytes over the
// threshold), and which blocks it frees depends on the limit itself (it frees blocks older than the
// average until reserved bytes fall below threshold x limit): the fraction with the fewest decimals in
// the bounds is often not the one the job set. Each fraction in the bounds is replayed with the model
// against the recorded device calls (fidelity, with the recorded addresses), roundest first; the first
// that reproduces them is the limit, else the one that agrees longest (capacity_for takes it only where
// an OOM proves a limit). Replays are bounded to about kReplayBudget events in all (a wrong fraction
// diverges at the collector's first release). An exact choice is remembered for the recording (the pool
// checker asks again on each of its rounds).
constexpr uint64_t kReplayBudget = 20'000'000;

struct Choice {
  double fraction;
  uint64_t total;  // the GPU's memory it is a fraction of
  bool exact;
  size_t tried;       // fractions replayed
  size_t candidates;  // fractions in the bounds
  bool gpu = false;   // no fraction reproduces the recording, the GPU's own limit (inferred.low) does
};

// The GPU's own limit: the pytorch model with limit=gpu (no collector, expandable segments refused only
// the pages they map) at the least limit the recording allows (it held that much).
bool gpu_limit_reproduces(const Trace& trace, const InferredCapacity& inferred) {
  if (inferred.low > inferred.gpu_high) return false;
  FidelityOptions options;
  options.capacity = inferred.low;
  options.policy = "pytorch:limit=gpu";
  return check_fidelity(trace, options).exact;
}

// `always`: verify even a single candidate (when only the collector's releases say there is a limit),
// and when no fraction reproduces the recording, try the GPU's own limit. `gpu_first`: the GPU's own limit
// before any fraction (retries with neither an OOM nor the collector: a job at the GPU's memory is far more
// common than one that set a fraction, and where both reproduce the recording nothing tells them apart).
std::optional<Choice> choose_by_replay(const Trace& trace, const InferredCapacity& inferred, uint64_t total,
                                       bool always, bool gpu_first = false) {
  std::vector<Candidate> candidates = inferred.high >= inferred.low
                                          ? fractions_within(inferred.low, inferred.high, totals_from(total))
                                          : std::vector<Candidate>{};
  if (!always && candidates.size() < 2) return std::nullopt;
  if (candidates.empty() && inferred.low > inferred.gpu_high) return std::nullopt;
  static std::mutex mutex;
  static std::vector<std::pair<uint64_t, Choice>> remembered;
  const uint64_t key = recording_key(trace);
  {
    std::lock_guard lock(mutex);
    for (const auto& [k, choice] : remembered)
      if (k == key) return choice;
  }
  Choice best{candidates.empty() ? 0.0 : candidates.front().fraction,
              candidates.empty() ? total : candidates.front().total, false, 0, candidates.size()};
  uint64_t best_reach = 0, spent = 0;
  if (gpu_first && gpu_limit_reproduces(trace, inferred)) {
    best.exact = best.gpu = true;
    candidates.clear();
  }
  for (const auto& [f, of] : candidates) {
    if (spent > kReplayBudget) break;
    FidelityOptions options;
    options.capacity = fraction_limit(f, of);
    options.policy = "pytorch:limit=fraction";  // whatever the trace says of its limit: this reading is tried
    const FidelityResult r = check_fidelity(trace, options);
    ++best.tried;
    spent += r.replay_events + 1;
    if (r.exact) {
      best.fraction = f;
      best.total = of;
      best.exact = true;
      break;
    }
    if (r.event_index > best_reach) best_reach = r.event_index, best.fraction = f, best.total = of;
  }
  if (!best.exact && always && !gpu_first && gpu_limit_reproduces(trace, inferred)) best.exact = best.gpu = true;
  if (best.exact) {  // a verdict that holds whatever the pools: remembered (a few recordings at most)
    std::lock_guard lock(mutex);
    if (remembered.size() == 8) remembered.erase(remembered.begin());
    remembered.emplace_back(key, best);
  }
  return best;
}

}  // namespace

std::vector<std::pair<uint64_t, int64_t>> gpu_limit_drift(const Trace& trace, const InferredCapacity& inferred) {
  if (!inferred.device_limit || inferred.ooms == 0) return {};
  const std::optional<detail::PytorchAllocatorConfig> config = recorded_config(trace.meta);
  if (!config) return {};
  return detail::limit_drift(trace.events, trace.meta.initial.reserved(), *config, detail::PytorchLimit::Gpu,
                             inferred.bytes);
}

namespace {

// Where the GPU's limit moved along the run (the driver's own memory grew, or another process on the GPU
// took or gave back memory): above the least its OOMs show where more was free, below it where less; the
// pytorch model follows it
// (allocators/pytorch/limit_drift.h); the note says by how much.
std::string drift_note(const Trace& trace, const InferredCapacity& inferred) {
  const auto steps = gpu_limit_drift(trace, inferred);
  if (steps.empty()) return "";
  const auto [lowest, highest] =
      std::minmax_element(steps.begin(), steps.end(), [](auto& a, auto& b) { return a.second < b.second; });
  std::string moved;
  if (highest->second > 0) moved = fmt::format("up to {} bytes higher", highest->second);
  if (lowest->second < 0) moved += fmt::format("{}up to {} bytes lower", moved.empty() ? "" : " and ", -lowest->second);
  return fmt::format(
      "; the GPU's free memory changed along the run (the driver's own memory, or another process's): from event {} "
      "the device calls show the limit {}, which the model follows",
      steps.front().first, moved);
}

}  // namespace

std::optional<uint64_t> capacity_for(const Trace& trace, std::optional<uint64_t> given, std::string* note,
                                     bool* gpu_limit) {
  if (gpu_limit) *gpu_limit = false;
  if (given) return given;
  auto inferred = infer_capacity(trace);
  if (!inferred) return std::nullopt;
  std::string verified;
  if ((inferred->gc_runs > 0 || inferred->retries_only) && !inferred->device_limit) {
    const uint64_t total = inferred->total_memory;
    // Without an OOM, the releases are the only sign of a limit, and a torch.cuda.empty_cache() right
    // before an allocation that needed a new segment looks the same: a limit is taken only where one
    // reproduces the recording. Retries with neither an OOM nor the collector try the GPU's own limit
    // first (choose_by_replay's gpu_first).
    const bool only_releases = inferred->ooms == 0;
    auto choice = choose_by_replay(trace, *inferred, total, only_releases, inferred->retries_only);
    // Read as the collector's, the runs need a fraction even where none reproduces them all (a program's
    // empty_cache() among them, say): the one that agrees longest, from which the runs are read one by one
    // (traces/formats/pytorch/pool_inference.h). A reading that keeps the program's runs replays without it.
    // Not where private pools are read (rule 7 revises them by replays under this limit, and a graph capture's
    // empty_cache() would be read as the collector's).
    const bool collector_start =
        choice && !choice->exact && !choice->gpu && inferred->gc_runs > 0 && trace.meta.pools.size() == 1;
    // Bounds that contradict each other show a run read as the collector's that was the program's: a fraction
    // under which they replay all the same proves nothing (a torch.cuda.graph() capture's empty_cache() and a
    // release at the limit alike), and this reading is not the recording's.
    if (only_releases && inferred->loose && choice && choice->exact) return std::nullopt;
    if (only_releases && (!choice || !choice->exact) && !collector_start) {
      if (note)
        *note = inferred->retries_only
                    ? fmt::format(
                          "no capacity inferred: segments released before new ones look like the allocator's "
                          "retries at the GPU's own limit (the recording bounds it to [{}, {}]), but the model at "
                          "that limit does not reproduce the recording (an empty_cache() before those allocations "
                          "would explain it; --capacity sets one)",
                          inferred->low, inferred->gpu_high)
                    : fmt::format(
                          "no capacity inferred: segments released before new ones look like garbage collection "
                          "under a memory fraction, but none of the {} fractions in the bounds [{}, {}] the model "
                          "replayed reproduces the recording, nor does the GPU's own limit (an empty_cache() "
                          "before those allocations would explain it; --capacity sets one)",
                          choice ? choice->tried : 0, inferred->low, inferred->high);
      return std::nullopt;
    }
    if (choice && choice->gpu) {
      inferred->device_limit = true;
      inferred->fraction.reset();
      inferred->bytes = inferred->low;
      if (gpu_limit) *gpu_limit = true;
    } else if (choice) {
      inferred->fraction = choice->fraction;
      inferred->total_memory = choice->total;
      inferred->bytes = fraction_limit(choice->fraction, choice->total);
      if (inferred->gc_runs > 0)
        verified = fmt::format(
            "; garbage collection's releases leave {} fractions in the bounds, the model replayed {}: "
            "{}",
            choice->candidates, choice->tried,
            choice->exact ? "this one reproduces the recorded device calls"
                          : "none reproduces them all, this one agrees longest");
    }
  }
  if (note) *note = inferred->describe() + verified + drift_note(trace, *inferred);
  return inferred->bytes;
}

}  // namespace fraglab
