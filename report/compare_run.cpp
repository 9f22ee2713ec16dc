#include "report/compare_run.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "allocators/registry.h"
#include "import/trace_import.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "traces/io/format_error.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

namespace fraglab {

namespace {

// File size in 4 KiB units (at least 1): the job's cost estimate. Units keep the
// plan's integer arithmetic far from overflow on corpora of terabytes.
uint64_t trace_weight(const std::string& path) {
  std::error_code ec;
  uint64_t bytes = std::filesystem::file_size(path, ec);
  return ec ? 1 : std::max<uint64_t>(1, bytes / 4096);
}

// Keeps the highest reserved point of each bucket of `bucket` replay events.
class SeriesSampler {
 public:
  SeriesSampler(uint64_t replay_events, CompareRow& row)
      : bucket_(std::max<uint64_t>(1, (replay_events + kSeriesPoints - 1) / kSeriesPoints)), row_(row) {}

  void add(const TimelinePoint& p) {
    if (seen_ > 0 && seen_ % bucket_ == 0) flush();
    if (!has_ || p.reserved > best_.reserved) best_ = p, has_ = true;
    ++seen_;
  }
  void flush() {
    if (!has_) return;
    row_.series_event.push_back(best_.event_index);
    row_.series_reserved.push_back(best_.reserved);
    has_ = false;
  }

 private:
  uint64_t bucket_, seen_ = 0;
  CompareRow& row_;
  TimelinePoint best_{};
  bool has_ = false;
};

struct LoadedTrace {
  Trace trace;
  uint64_t replay_events = 0, live_bound = 0, recorded_peak = 0;
};

// One trace's state shared by its jobs: loaded on first use, dropped after the last.
struct TraceSlot {
  std::mutex mutex;
  std::shared_ptr<const LoadedTrace> loaded;
  size_t jobs_left = 0;
};

std::shared_ptr<const LoadedTrace> load(const std::string& path) {
  auto lt = std::make_shared<LoadedTrace>();
  lt->trace = load_trace(path, {kAnyDevice});  // a DDP/FSDP rank's snapshot: its own GPU
  MemorySource source(lt->trace);
  TraceStats stats = compute_stats(source);
  lt->live_bound = stats.peak_live_requested;
  lt->recorded_peak = stats.recorded_peak_reserved;
  for (const auto& e : lt->trace.events) lt->replay_events += is_replay_event(e.kind);
  return lt;
}

CompareRow replay_one(const LoadedTrace& lt, const std::string& trace, const std::string& policy,
                      const std::optional<uint64_t>& capacity, AddressModel addresses) {
  CompareRow row;
  row.trace = trace;
  row.policy = policy;
  row.live_bytes_bound = lt.live_bound;
  row.recorded_peak_reserved = lt.recorded_peak;
  SeriesSampler sampler(lt.replay_events, row);
  ReplayOptions options;
  options.on_oom = OnOom::Skip;  // count every failure instead of stopping at the first
  options.on_event = [&sampler](const TimelinePoint& p) { sampler.add(p); };
  SimDeviceConfig config;
  config.capacity = capacity;
  config.addresses = addresses;
  MemorySource source(lt.trace);
  ReplayResult r = replay_simulated(source, PolicySpec::parse(policy), config, options, &lt.trace.events);
  sampler.flush();
  row.events = r.events;
  row.allocs = r.allocs;
  row.peak_reserved = r.reserved.bytes;
  row.peak_reserved_event = r.reserved.event_index;
  row.peak_allocated = r.allocated.bytes;
  row.free_at_peak = r.at_peak.free_bytes;
  row.largest_free_at_peak = r.at_peak.largest_free;
  row.free_ranges_at_peak = r.at_peak.free_ranges;
  row.segment_allocs = r.calls.segment_allocs;
  row.segment_frees = r.calls.segment_frees;
  row.maps = r.calls.maps;
  row.unmaps = r.calls.unmaps;
  row.reserves = r.calls.reserves;
  row.releases = r.calls.releases;
  row.failed_device_calls = r.calls.failed;
  row.ooms = r.ooms.size();
  row.replay_seconds = r.seconds;
  return row;
}

}  // namespace

std::vector<size_t> shard_jobs(const std::vector<uint64_t>& trace_weights, size_t policies, const ShardId& shard) {
  uint64_t total = 0;
  for (uint64_t w : trace_weights) total += w * policies;
  std::vector<size_t> jobs;
  uint64_t before = 0;  // weight of all jobs ahead of this one
  for (size_t t = 0; t < trace_weights.size(); ++t) {
    for (size_t p = 0; p < policies; ++p) {
      uint64_t w = trace_weights[t];
      // The shard whose share of the total weight holds this job's midpoint.
      uint64_t k = total ? (2 * before + w) * static_cast<uint64_t>(shard.count) / (2 * total) : 0;
      if (static_cast<int>(std::min<uint64_t>(k, shard.count - 1)) == shard.index - 1) jobs.push_back(t * policies + p);
      before += w;
    }
  }
  return jobs;
}

CompareResults run_compare(const CompareOptions& o) {
  CompareResults results;
  results.traces = o.traces;
  results.policies = o.policies;
  results.capacity = o.capacity;
  results.shard = o.shard;
  const size_t P = o.policies.size();

  std::vector<uint64_t> weights;
  for (const auto& t : o.traces) weights.push_back(trace_weight(t));
  std::vector<size_t> jobs = shard_jobs(weights, P, o.shard.value_or(ShardId{}));
  // Biggest traces first; a trace's jobs stay together so it is loaded once.
  std::stable_sort(jobs.begin(), jobs.end(), [&](size_t a, size_t b) { return weights[a / P] > weights[b / P]; });

  std::vector<TraceSlot> slots(o.traces.size());
  for (size_t j : jobs) ++slots[j / P].jobs_left;
  std::vector<CompareRow> rows(jobs.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex done_mutex;
  size_t done = 0;
  std::exception_ptr first_error;
  size_t first_error_job = SIZE_MAX;

  auto worker = [&] {
    for (size_t i; !failed && (i = next++) < jobs.size();) {
      size_t t = jobs[i] / P, p = jobs[i] % P;
      try {
        std::shared_ptr<const LoadedTrace> lt;
        {
          std::lock_guard lock(slots[t].mutex);
          if (!slots[t].loaded) slots[t].loaded = load(o.traces[t]);
          lt = slots[t].loaded;
        }
        try {
          rows[i] = replay_one(*lt, o.traces[t], o.policies[p], o.capacity, o.addresses);
        } catch (const FormatError&) {
          throw;
        } catch (const PolicyConfigError& e) {
          throw PolicyConfigError(o.policies[p] + ": " + e.what());
        } catch (const std::exception& e) {
          throw std::runtime_error("replaying " + o.traces[t] + " with " + o.policies[p] + ": " + e.what());
        }
        std::lock_guard lock(slots[t].mutex);
        if (--slots[t].jobs_left == 0) slots[t].loaded.reset();
      } catch (...) {
        std::lock_guard lock(done_mutex);
        failed = true;
        if (jobs[i] < first_error_job) first_error_job = jobs[i], first_error = std::current_exception();
        continue;
      }
      std::lock_guard lock(done_mutex);
      ++done;
      if (o.progress) o.progress(done, jobs.size(), o.traces[t], o.policies[p]);
    }
  };
  unsigned threads = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, std::max<size_t>(1, jobs.size())));
  {
    std::vector<std::jthread> pool;
    for (unsigned k = 1; k < threads; ++k) pool.emplace_back(worker);
    worker();
  }
  if (first_error) std::rethrow_exception(first_error);
  results.rows = std::move(rows);
  results.sort_rows();
  return results;
}

}  // namespace fraglab
