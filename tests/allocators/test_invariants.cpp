// The invariant harness: every registered policy, on randomized traces, with and without
// a device capacity that forces failures (replayed with --on-oom skip semantics).
//
// A policy is covered by registering it: the harness walks policy_registry() and builds
// each with its default options. Per trace it checks, through the replay engine's own
// checks (check_invariants) and its own:
//  - live blocks never overlap, are at least as large as their request, and lie inside
//    physical device memory the policy holds (segments or mapped pages);
//  - every block address is a multiple of the policy's PolicyInfo::alignment;
//  - after empty_cache with nothing live, the device holds at most
//    PolicyInfo::reserved_after_empty_cache bytes;
//  - at the end (all freed, then empty_cache) nothing leaks: reserved drops to that
//    documented amount, and for a policy that documents 0 no segment is left, nor a
//    reserved range unless it says it keeps one (PolicyInfo::keeps_address_ranges);
//  - a second run with the same seed gives the same peaks and the same device call log.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

#include "allocators/registry.h"
#include "device/call_log_device.h"
#include "device/simulated_gpu.h"
#include "sim/replay.h"

namespace fraglab {
namespace {

constexpr uint64_t KiB = 1ull << 10, MiB = 1ull << 20, GiB = 1ull << 30;

// Request sizes as DNN workloads show them: a heavy tail of tiny tensors (1 B up), many
// medium ones, and rare huge ones (several GiB). Log-uniform inside each band.
uint64_t random_size(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double band = unit(rng);
  auto log_uniform = [&](uint64_t lo, uint64_t hi) {
    double x = std::exp(std::log(static_cast<double>(lo)) +
                        unit(rng) * (std::log(static_cast<double>(hi)) - std::log(static_cast<double>(lo))));
    return std::clamp<uint64_t>(static_cast<uint64_t>(x), lo, hi);
  };
  if (band < 0.50) return log_uniform(1, 8 * KiB);
  if (band < 0.85) return log_uniform(8 * KiB, 16 * MiB);
  if (band < 0.985) return log_uniform(16 * MiB, 512 * MiB);
  return log_uniform(512 * MiB, 6 * GiB);
}

struct RandomTrace {
  Trace trace;
  uint64_t peak_requested = 0;
};

// A trace of about `n` replay events on 1-4 streams. Lifetimes are random (a free picks
// any live block, biased to recent ones as activations are); now and then the program
// calls empty_cache, sometimes after dropping everything (a phase boundary), so the
// "nothing live" check fires. The trace ends with every block freed and an empty_cache.
RandomTrace make_random_trace(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  RandomTrace out;
  TraceMeta& meta = out.trace.meta;
  meta.source = "invariant harness seed " + std::to_string(seed);
  meta.format = "generated";
  size_t streams = 1 + rng() % 4;
  for (size_t s = 1; s < streams; ++s) meta.streams.push_back(0x1000 + s);

  IdSlots ids;
  std::vector<std::pair<AllocId, uint64_t>> live;  // (id, size)
  uint64_t live_bytes = 0;
  auto& events = out.trace.events;
  auto free_at = [&](size_t i) {
    Event e;
    e.kind = EventKind::Free;
    e.id = live[i].first;
    e.stream = 0;
    live_bytes -= live[i].second;
    ids.release(live[i].first);
    live[i] = live.back();
    live.pop_back();
    events.push_back(e);
  };
  auto empty_cache = [&] {
    Event e;
    e.kind = EventKind::EmptyCache;
    events.push_back(e);
  };
  while (events.size() < n) {
    double r = unit(rng);
    if (r < 0.004) {
      empty_cache();
    } else if (r < 0.007) {
      while (!live.empty()) free_at(rng() % live.size());
      empty_cache();
    } else if (live.empty() || r < 0.53) {
      Event e;
      e.kind = EventKind::Alloc;
      e.id = ids.acquire();
      e.size = random_size(rng);
      e.stream = static_cast<StreamIndex>(rng() % streams);
      e.time_us = static_cast<int64_t>(events.size());
      live.emplace_back(e.id, e.size);
      live_bytes += e.size;
      out.peak_requested = std::max(out.peak_requested, live_bytes);
      events.push_back(e);
    } else {
      // Half the frees take one of the 8 newest blocks (short-lived activations).
      size_t i = unit(rng) < 0.5 ? live.size() - 1 - rng() % std::min<size_t>(8, live.size()) : rng() % live.size();
      free_at(i);
    }
  }
  while (!live.empty()) free_at(rng() % live.size());
  empty_cache();
  return out;
}

struct RunOutcome {
  uint64_t peak_reserved = 0, peak_allocated = 0, ooms = 0;
  std::vector<DeviceCall> calls;
};

[[noreturn]] void broken(const std::string& what, uint64_t index) {
  throw std::logic_error("event " + std::to_string(index) + ": " + what);
}

// Replays `t` through a fresh instance of `info`'s policy, checking as it goes.
RunOutcome run_checked(const PolicyInfo& info, const Trace& t, std::optional<uint64_t> capacity) {
  SimDeviceConfig config;
  config.capacity = capacity;
  SimulatedGpu sim(config);
  TrackingDevice device(sim);
  CallLogDevice log(device);
  PolicySpec spec = PolicySpec::parse(info.name);
  auto policy = make_policy(spec, log, t.meta, info.needs_whole_trace ? &t.events : nullptr);
  ReplayOptions options;
  options.on_oom = OnOom::Skip;
  options.check_invariants = true;
  ReplayEngine engine(*policy, device, options);
  log.follow(engine.event_index());

  auto check_all_backed = [&](uint64_t index) {
    for (const auto& b : engine.blocks())
      if (b.live && !device.is_backed(b.addr, b.size)) broken("a live block lost its device memory", index);
  };
  for (uint64_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (!engine.apply(e, i)) broken("replay stopped", i);
    if (e.kind == EventKind::Alloc && engine.blocks()[e.id].live) {
      const BlockRecord& b = engine.blocks()[e.id];
      if (b.addr % info.alignment)
        broken("block at " + std::to_string(b.addr) + " is not " + std::to_string(info.alignment) + "-aligned", i);
    }
    if (e.kind == EventKind::EmptyCache) {
      check_all_backed(i);
      if (engine.allocated_live() == 0 && device.reserved_bytes() > info.reserved_after_empty_cache)
        broken("empty_cache with nothing live left " + std::to_string(device.reserved_bytes()) +
                   " bytes reserved (documented: " + std::to_string(info.reserved_after_empty_cache) + ")",
               i);
    }
    if (i % 512 == 0) check_all_backed(i);
  }
  if (engine.allocated_live() != 0) broken("trace ended with blocks live", t.events.size());
  if (device.reserved_bytes() > info.reserved_after_empty_cache)
    broken("leak at the end: " + std::to_string(device.reserved_bytes()) + " bytes reserved", t.events.size());
  if (info.reserved_after_empty_cache == 0) {
    for (const DeviceRegion& r : device.regions())
      if (!r.is_vmm || !info.keeps_address_ranges)
        broken(std::string("leak at the end: a ") + (r.is_vmm ? "reserved range" : "segment") + " of " +
                   std::to_string(r.size) + " bytes is left",
               t.events.size());
  }
  ReplayResult r = engine.take_result();
  return {r.reserved.bytes, r.allocated.bytes, r.ooms.size(), log.take_calls()};
}

bool same_calls(const std::vector<DeviceCall>& a, const std::vector<DeviceCall>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].kind != b[i].kind || a[i].addr != b[i].addr || a[i].size != b[i].size ||
        a[i].event_index != b[i].event_index)
      return false;
  return true;
}

}  // namespace

TEST_CASE("every registered policy keeps the allocator invariants on random traces", "[invariants]") {
  constexpr int kSeeds = 10;
  constexpr size_t kEvents = 1200;
  std::vector<RandomTrace> traces;
  for (int seed = 1; seed <= kSeeds; ++seed) traces.push_back(make_random_trace(static_cast<uint64_t>(seed), kEvents));

  uint64_t forced_failures = 0;
  // Every policy is checked even when an earlier one fails; a policy stops at its first
  // broken invariant (the rest of its runs would only repeat it).
  auto check_policy = [&](const PolicyInfo& info) {
    for (int seed = 1; seed <= kSeeds; ++seed) {
      const RandomTrace& rt = traces[seed - 1];
      // Unlimited, then a card smaller than the trace's live peak (so requests must fail
      // and the policy must recover), then one with headroom that still forces its cache
      // to be returned now and then.
      for (double cap : {0.0, 0.6, 1.3}) {
        std::optional<uint64_t> capacity;
        if (cap > 0) capacity = static_cast<uint64_t>(static_cast<double>(rt.peak_requested) * cap);
        INFO("policy " << info.name << ", seed " << seed << ", capacity "
                       << (capacity ? format_size(*capacity) : std::string("unlimited")));
        RunOutcome first, second;
        try {
          first = run_checked(info, rt.trace, capacity);
          second = run_checked(info, rt.trace, capacity);
        } catch (const std::exception& e) {
          FAIL_CHECK(e.what());
          return;
        }
        CHECK(first.peak_reserved == second.peak_reserved);
        CHECK(first.peak_allocated == second.peak_allocated);
        CHECK(first.ooms == second.ooms);
        CHECK(same_calls(first.calls, second.calls));
        if (capacity) CHECK(first.peak_reserved <= *capacity);
        if (cap == 0.6) forced_failures += first.ooms;
      }
    }
  };
  for (const PolicyInfo& info : policy_registry()) check_policy(info);
  // The tight capacity must actually make requests fail, or that half tests nothing.
  CHECK(forced_failures > 0);
}

TEST_CASE("random traces are well formed and reproducible", "[invariants]") {
  RandomTrace a = make_random_trace(7, 3000), b = make_random_trace(7, 3000), c = make_random_trace(8, 3000);
  CHECK(a.trace.events == b.trace.events);
  CHECK(a.trace.events != c.trace.events);
  uint64_t tiny = 0, huge = 0, empties = 0;
  for (const auto& e : a.trace.events) {
    if (e.kind == EventKind::Alloc && e.size <= 4096) ++tiny;
    if (e.kind == EventKind::Alloc && e.size >= GiB) ++huge;
    if (e.kind == EventKind::EmptyCache) ++empties;
  }
  CHECK(tiny > 300);  // the heavy small tail: about 40% of ~1500 allocs
  CHECK(huge > 0);    // and the rare GiB-sized ones (1.5% of allocs above 512 MiB)
  CHECK(empties >= 2);
  CHECK(a.trace.events.back().kind == EventKind::EmptyCache);
}

}  // namespace fraglab
