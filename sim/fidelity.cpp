#include "sim/fidelity.h"

#include "traces/history_check.h"

#include <fmt/core.h>

#include <deque>
#include <memory>

#include "allocators/registry.h"
#include "device/call_log_device.h"
#include "device/hinted_device.h"
#include "device/limiting_device.h"
#include "device/tracking_device.h"
#include "sim/replay.h"

namespace fraglab {

namespace {

bool is_step(EventKind k) { return is_replay_event(k) || k == EventKind::Oom; }
bool is_release(EventKind k) { return k == EventKind::SegmentFree || k == EventKind::SegmentUnmap; }

// A MemPool's destructor (releasePool, then emptyCache of that pool alone: PoolInfo::empties_on_release).
bool mempool_deleted(const Event& e, const TraceMeta& meta) {
  return e.kind == EventKind::PoolRelease && e.pool < meta.pools.size() && meta.pools[e.pool].empties_on_release;
}

// An empty_cache, or a MemPool's destructor: the releases that follow it are its own.
bool empties(const Event& e, const TraceMeta& meta) {
  return e.kind == EventKind::EmptyCache || mempool_deleted(e, meta);
}

// Pool releases and empty_caches with only releases between them are one group: MemPools' destructors
// (each emptying its pool) and the program's empty_cache, whose releases are compared together, as a set.
// Where the pools were inferred, which release was whose is a reading; the state after them is the same.
bool in_release_group(EventKind k) { return k == EventKind::PoolRelease || k == EventKind::EmptyCache; }

std::string describe(const Event& e, uint64_t index) {
  std::string s = fmt::format("#{} {}", index, event_kind_name(e.kind));
  if (e.kind == EventKind::Alloc || e.kind == EventKind::Free || e.kind == EventKind::FreeRequested)
    s += fmt::format(" id={}", e.id);
  if (e.size || e.kind == EventKind::Alloc) s += fmt::format(" size={}", e.size);
  if (e.addr) s += fmt::format(" addr=0x{:x}", e.addr);
  if (e.stream) s += fmt::format(" stream#{}", e.stream);
  return s;
}

std::string describe(const DeviceCall& c) {
  return fmt::format("{} size={} addr=0x{:x}", event_kind_name(c.kind), c.size, c.addr);
}

class Checker {
 public:
  Checker(const Trace& trace, const FidelityOptions& options) : trace_(trace), options_(options) {}

  FidelityResult run() {
    // A history no allocator can have made matches no model: never "exact", whatever a replay shows.
    if (HistoryProblems impossible = check_history(trace_); impossible.count) {
      diverge(std::min<uint64_t>(impossible.first_event, trace_.events.empty() ? 0 : trace_.events.size() - 1),
              fmt::format("the recorded history is impossible ({} problem{}): {}", impossible.count,
                          impossible.count == 1 ? "" : "s", impossible.first));
      result_.exact = false;
      return std::move(result_);
    }
    SimDeviceConfig config;
    // With hints, a HintedDevice over a SimDevice of the bump model; without, the SimDevice alone.
    SimDevice sim(options_.hint_addresses ? hinted_upstream_config(config) : config);
    std::optional<HintedDevice> hinted;
    if (options_.hint_addresses) hinted.emplace(sim, trace_.events, &trace_.meta.initial);
    LimitingDevice limited(hinted ? static_cast<Device&>(*hinted) : sim, options_.capacity);
    TrackingDevice device(limited);
    CallLogDevice log(device);  // the policy's calls, compared with the recording's
    auto policy = make_policy(PolicySpec::parse(options_.policy), log, trace_.meta, &trace_.events);
    let_policy_enforce(*policy, limited);
    ReplayOptions ro;
    ro.on_oom = OnOom::Skip;
    ReplayEngine engine(*policy, device, ro);
    engine.set_policy_name("policy '" + options_.policy + "'");
    // A history that began mid-run starts from the state then: its segments are the recording's.
    engine.establish_initial_state(trace_.meta.initial);
    uint64_t recorded_reserved = trace_.meta.initial.reserved();
    result_.recorded_peak = recorded_reserved;
    if (device.reserved_bytes() != recorded_reserved)
      diverge(0, fmt::format("the state at the first entry: model reserved {}, recording {}", device.reserved_bytes(),
                             recorded_reserved));
    std::vector<uint64_t> pending;  // recorded device events since the last step
    const auto& events = trace_.events;
    uint64_t consumed_until = 0;     // device events already taken by an empty_cache step
    size_t merged_calls = SIZE_MAX;  // where the calls of a release group's earlier steps begin (SIZE_MAX: none)
    for (uint64_t i = 0; i < events.size() && !diverged_; ++i) {
      const Event& e = events[i];
      if (i < consumed_until) continue;
      if (empties(e, trace_.meta)) {
        // The releases that follow an empty_cache are its own (the reader puts the event
        // before them); calls before it belong to it too if the reader put it after them.
        uint64_t j = i + 1;
        for (; j < events.size() && is_release(events[j].kind); ++j) {
          pending.push_back(j);
          recorded_reserved -= events[j].size;
        }
        consumed_until = j;
      }
      if (is_device_event(e.kind)) {
        pending.push_back(i);
        bool grows = e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap;
        recorded_reserved = grows ? recorded_reserved + e.size : recorded_reserved - e.size;
        result_.recorded_peak = std::max(result_.recorded_peak, recorded_reserved);
        continue;
      }
      if (!is_step(e.kind)) continue;
      size_t calls_before = merged_calls != SIZE_MAX ? merged_calls : log.calls().size();
      merged_calls = SIZE_MAX;
      size_t ooms_before = engine.result().ooms.size();
      log.set_event_index(i);
      if (e.kind == EventKind::Oom) {
        engine.settle_peak();
        auto block = policy->allocate(AllocRequest{UINT32_MAX, e.size, e.stream, i, e.pool});
        if (block)
          diverge(i, "the recording ran out of memory here; the model found a block");
        else
          ++result_.ooms;
      } else {
        engine.apply(e, i);
        ++result_.replay_events;
        if (engine.result().ooms.size() != ooms_before)
          diverge(i, fmt::format("the model ran out of memory serving {}; the recording did not", describe(e, i)));
        const uint64_t next = std::max(i + 1, consumed_until);
        if (in_release_group(e.kind) && next < events.size() && in_release_group(events[next].kind)) {
          merged_calls = calls_before;  // compared with the group's last step
          continue;
        }
      }
      if (!diverged_) compare_calls(log.calls(), calls_before, pending, i);
      if (!diverged_) {
        ++result_.reserved_checks;
        if (device.reserved_bytes() != recorded_reserved)
          diverge(i, fmt::format("reserved bytes after the event: model {}, recording {}", device.reserved_bytes(),
                                 recorded_reserved));
      }
      pending.clear();
    }
    if (!diverged_ && !pending.empty())
      diverge(pending.front(), "the recording made device calls after its last request, which nothing replays");
    result_.simulated_peak = device.peak_reserved();
    result_.exact = !diverged_;
    return std::move(result_);
  }

 private:
  void compare_calls(const std::vector<DeviceCall>& log, size_t from, std::vector<uint64_t> recorded, uint64_t step) {
    size_t simulated = log.size() - from;
    // One empty_cache may stand for several calls (a MemPool's destructor empties its pool, then the
    // program empty_cache()): the releases are compared as a set, in the model's order. The state after
    // them is the same in any order.
    if (in_release_group(trace_.events[step].kind)) match_order(log, from, recorded);
    for (size_t k = 0; k < std::max(simulated, recorded.size()); ++k) {
      if (k >= recorded.size()) {
        diverge(step, fmt::format("the model made a device call the recording did not: {}", describe(log[from + k])));
        break;
      }
      const Event& r = trace_.events[recorded[k]];
      if (k >= simulated) {
        diverge(recorded[k],
                fmt::format("the recording made a device call the model did not: {}", describe(r, recorded[k])));
        break;
      }
      const DeviceCall& c = log[from + k];
      if (c.kind != r.kind || c.size != r.size) {
        diverge(recorded[k],
                fmt::format("device call differs: recording {}, model {}", describe(r, recorded[k]), describe(c)));
        break;
      }
      ++result_.device_calls;
    }
    if (diverged_) {
      result_.context.push_back(fmt::format("model's device calls for #{}:", step));
      for (size_t k = from; k < log.size(); ++k) result_.context.push_back("  " + describe(log[k]));
    }
  }

  void match_order(const std::vector<DeviceCall>& log, size_t from, std::vector<uint64_t>& recorded) const {
    std::map<std::pair<EventKind, uint64_t>, std::deque<uint64_t>> by_call;
    for (uint64_t r : recorded) by_call[{trace_.events[r].kind, trace_.events[r].size}].push_back(r);
    std::vector<uint64_t> ordered;
    ordered.reserve(recorded.size());
    for (size_t k = from; k < log.size(); ++k) {
      auto it = by_call.find({log[k].kind, log[k].size});
      if (it == by_call.end() || it->second.empty()) continue;
      ordered.push_back(it->second.front());
      it->second.pop_front();
    }
    for (uint64_t r : recorded)  // the unmatched ones keep their order, after the matched
      if (auto& q = by_call[{trace_.events[r].kind, trace_.events[r].size}]; !q.empty() && q.front() == r) {
        ordered.push_back(r);
        q.pop_front();
      }
    recorded = std::move(ordered);
  }

  void diverge(uint64_t index, const std::string& what) {
    if (diverged_) return;
    diverged_ = true;
    result_.event_index = index;
    result_.what = what;
    uint64_t lo = index > options_.context ? index - options_.context : 0;
    uint64_t hi = std::min<uint64_t>(trace_.events.size(), index + options_.context + 1);
    result_.context.push_back("recording:");
    for (uint64_t j = lo; j < hi; ++j)
      result_.context.push_back((j == index ? "> " : "  ") + describe(trace_.events[j], j));
  }

  const Trace& trace_;
  const FidelityOptions& options_;
  FidelityResult result_;
  bool diverged_ = false;
};

}  // namespace

FidelityResult check_fidelity(const Trace& trace, const FidelityOptions& options) {
  return Checker(trace, options).run();
}

}  // namespace fraglab
