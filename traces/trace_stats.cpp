#include "traces/trace_stats.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <numeric>

namespace fraglab {

namespace {
int log2_bucket(double v) {
  if (v < 1) return 0;
  if (v >= 18446744073709551616.0) return 63;  // past 2^64 (hostile times): the cast below would be undefined
  return std::min(63, static_cast<int>(std::bit_width(static_cast<uint64_t>(v))) - 1);
}
// A double's bits made to sort as the doubles do (negative values turned around). The columns hold no NaN and
// no -0.0 (sizes are unsigned; a lifetime is a difference, and x - x is +0.0).
uint64_t sort_key(double v) {
  const auto bits = std::bit_cast<uint64_t>(v);
  return bits >> 63 ? ~bits : bits | (uint64_t{1} << 63);
}
size_t percentile_index(size_t n, double p) {
  return std::min(static_cast<size_t>(p * static_cast<double>(n - 1) + 0.5), n - 1);
}
}  // namespace

// Exact percentiles in two passes over the column instead of three selections and three more passes (a 2.4M-
// event snapshot's three columns were a third of `info` after its import): the first counts the values by
// their top 16 key bits (and takes the minimum, maximum, sum and log2 buckets), the second gathers the values
// of the bins the percentiles fall in, selected among themselves alone.
Distribution summarize(const std::vector<double>& values) {
  Distribution d;
  d.count = values.size();
  if (values.empty()) return d;
  constexpr int kShift = 48;
  std::vector<uint64_t> bins(size_t{1} << (64 - kShift), 0);
  double lo = values.front(), hi = values.front(), sum = 0;
  for (double v : values) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    ++d.log2_buckets[static_cast<size_t>(log2_bucket(v))];
    ++bins[sort_key(v) >> kShift];
  }
  d.min = lo;
  d.max = hi;
  d.mean = sum / static_cast<double>(values.size());
  // Each percentile's bin and its rank inside the bin.
  struct Wanted {
    double* out;
    size_t rank;
    size_t bin = 0, below = 0;  // values in lower bins
  };
  std::array<Wanted, 3> wanted{{{&d.p50, percentile_index(values.size(), 0.50)},
                                {&d.p90, percentile_index(values.size(), 0.90)},
                                {&d.p99, percentile_index(values.size(), 0.99)}}};
  size_t seen = 0, w = 0;
  for (size_t bin = 0; bin < bins.size() && w < wanted.size(); ++bin) {
    while (w < wanted.size() && wanted[w].rank < seen + bins[bin]) wanted[w].bin = bin, wanted[w].below = seen, ++w;
    seen += bins[bin];
  }
  // The ranks ascend, so equal bins are neighbours: each bin gathered once.
  std::array<uint64_t, 3> group_bin{};
  std::array<size_t, 3> group_of{};
  size_t groups = 0;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (groups == 0 || group_bin[groups - 1] != wanted[i].bin) group_bin[groups++] = wanted[i].bin;
    group_of[i] = groups - 1;
  }
  std::array<std::vector<double>, 3> gathered;
  for (size_t g = 0; g < groups; ++g) gathered[g].reserve(bins[group_bin[g]]);
  for (double v : values) {
    const uint64_t bin = sort_key(v) >> kShift;
    for (size_t g = 0; g < groups; ++g)
      if (bin == group_bin[g]) {
        gathered[g].push_back(v);
        break;
      }
  }
  for (size_t i = 0; i < wanted.size(); ++i) {
    std::vector<double>& in = gathered[group_of[i]];
    auto nth = in.begin() + static_cast<std::ptrdiff_t>(wanted[i].rank - wanted[i].below);
    std::nth_element(in.begin(), nth, in.end());
    *wanted[i].out = *nth;
  }
  return d;
}

TraceStats compute_stats(EventSource& source, const std::function<void(const Event*, size_t, uint64_t)>& also) {
  TraceStats s;
  struct Open {
    uint64_t index = 0, size = 0;
    int64_t time = 0;
    bool live = false;
  };
  std::vector<Open> open;
  std::vector<bool> stream_seen;
  std::vector<double> sizes, life_events, life_us;
  uint64_t live = 0, live_count = 0;
  // A history that began mid-run starts with the segments the allocator held then.
  uint64_t reserved = source.meta().initial.reserved();
  s.recorded_peak_reserved = reserved;
  const uint64_t prologue = source.meta().initial.live_blocks;  // their lifetimes began before the history
  std::vector<Event> buf;
  uint64_t index = 0;
  bool first = true;
  // In place where the source holds its events (a snapshot read whole: no copy of 100 MB of events).
  auto next = [&](size_t& n) -> const Event* {
    constexpr size_t kChunk = 1 << 16;
    if (const Event* at = source.read_in_place(kChunk, n)) return at;
    if (buf.empty()) buf.resize(kChunk);
    n = source.read(buf.data(), buf.size());
    return buf.data();
  };
  size_t n = 0;
  for (const Event* chunk = next(n); n; chunk = next(n)) {
    if (also) also(chunk, n, index);
    for (size_t i = 0; i < n; ++i, ++index) {
      const Event& e = chunk[i];
      ++s.by_kind[static_cast<size_t>(e.kind)];
      if (e.kind == EventKind::Alloc) {
        if (e.pool >= s.allocs_by_pool.size()) s.allocs_by_pool.resize(e.pool + 1u);
        ++s.allocs_by_pool[e.pool];
        if (e.compile_context) {  // torch.compile regions (snapshots recorded with compile_context=True)
          if (e.compile_context >= s.by_compile_context.size()) s.by_compile_context.resize(e.compile_context + 1u);
          ++s.by_compile_context[e.compile_context].allocations;
          s.by_compile_context[e.compile_context].requested_bytes += e.size;
        }
      }
      if (first) s.first_time_us = e.time_us;
      first = false;
      s.last_time_us = std::max(s.last_time_us, e.time_us);
      if (e.stream >= stream_seen.size()) stream_seen.resize(e.stream + 1u);
      stream_seen[e.stream] = true;
      switch (e.kind) {
        case EventKind::Alloc:
          if (e.id >= open.size()) open.resize(e.id + 1u);
          open[e.id] = {index, e.size, e.time_us, true};
          live += e.size;
          ++live_count;
          s.total_requested += e.size;
          sizes.push_back(static_cast<double>(e.size));
          if (live > s.peak_live_requested) {
            s.peak_live_requested = live;
            s.peak_live_index = index;
          }
          s.peak_live_count = std::max(s.peak_live_count, live_count);
          break;
        case EventKind::Free:
          if (e.id < open.size() && open[e.id].live) {
            open[e.id].live = false;
            live -= open[e.id].size;
            --live_count;
            if (open[e.id].index >= prologue) {
              life_events.push_back(static_cast<double>(index - open[e.id].index));
              // In double: hostile times (INT64_MIN, INT64_MAX) would overflow an int64 difference.
              life_us.push_back(static_cast<double>(e.time_us) - static_cast<double>(open[e.id].time));
            }
          }
          break;
        case EventKind::SegmentAlloc:
        case EventKind::SegmentMap:
          reserved += e.size;
          s.recorded_peak_reserved = std::max(s.recorded_peak_reserved, reserved);
          break;
        case EventKind::SegmentFree:
        case EventKind::SegmentUnmap:
          reserved -= std::min(reserved, e.size);
          break;
        default:
          break;
      }
    }
  }
  s.events = index;
  s.never_freed = live_count;
  s.streams_used = static_cast<uint64_t>(std::count(stream_seen.begin(), stream_seen.end(), true));
  s.sizes = summarize(sizes);
  s.lifetimes_events = summarize(life_events);
  s.lifetimes_us = summarize(life_us);
  return s;
}

}  // namespace fraglab
