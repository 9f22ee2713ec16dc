// The LD_PRELOAD recorder's buffer and its conversion of raw CUDA calls into a trace
// (the interposer itself is exercised on the GPU machine: docs/recorder.md).
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "recorder/record_buffer.h"
#include "recorder/record_trace.h"

using namespace fraglab;
using record::CallKind;

TEST_CASE("recorder: calls become allocations and frees with dense ids", "[recorder]") {
  record::RecordBuffer buf;
  buf.append(CallKind::Free, 0x9000, 0, 0, 1);  // allocated before recording: dropped
  buf.append(CallKind::Malloc, 0x1000, 4096, 0, 2);
  buf.append(CallKind::Malloc, 0x2000, 100, 77, 3);
  buf.append(CallKind::Free, 0x1000, 0, 0, 4);
  buf.append(CallKind::Malloc, 0x1000, 512, 77, 5);  // address reused: a new allocation
  buf.append(CallKind::MallocFailed, 0, 1u << 30, 0, 6);
  buf.append(CallKind::Malloc, 0, 0, 0, 7);  // cudaMalloc(0): nullptr, nothing to track
  Trace t = record::to_trace(buf, buf.close(), "test");
  REQUIRE(t.events.size() == 5);
  CHECK(t.meta.dropped_unknown_frees == 1);
  CHECK(t.meta.streams == std::vector<uint64_t>{0, 77});
  CHECK(t.events[0].kind == EventKind::Alloc);
  CHECK(t.events[0].id == 0);
  CHECK(t.events[0].addr == 0x1000);
  CHECK(t.events[1].id == 1);
  CHECK(t.events[1].stream == 1);
  CHECK(t.events[2].kind == EventKind::Free);
  CHECK(t.events[2].id == 0);
  CHECK(t.events[3].id == 0);  // slot 0 was free again
  CHECK(t.events[3].size == 512);
  CHECK(t.events[4].kind == EventKind::Oom);
  CHECK(t.events[4].size == (1u << 30));
}

TEST_CASE("recorder: an address handed out twice closes the unseen free", "[recorder]") {
  record::RecordBuffer buf;
  buf.append(CallKind::Malloc, 0x1000, 10, 0, 1);
  buf.append(CallKind::Malloc, 0x1000, 20, 0, 2);
  Trace t = record::to_trace(buf, buf.close(), "test");
  REQUIRE(t.events.size() == 3);
  CHECK(t.events[1].kind == EventKind::Free);
  CHECK(t.events[1].id == t.events[0].id);
  CHECK(t.events[2].kind == EventKind::Alloc);
  CHECK(t.events[2].id != t.events[0].id);
}

TEST_CASE("recorder: appends from many threads all land, closed buffers drop", "[recorder]") {
  record::RecordBuffer buf;
  const int threads = 4, per_thread = 100000;  // spans several chunks
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i)
        buf.append(CallKind::Malloc, (static_cast<uint64_t>(t) << 32) | (i + 1), 1, 0, i);
    });
  for (auto& th : pool) th.join();
  uint64_t n = buf.close();
  REQUIRE(n == threads * per_thread);
  uint64_t seen = 0;
  for (uint64_t i = 0; i < n; ++i) seen += buf.at(i) != nullptr;
  CHECK(seen == n);
  CHECK_FALSE(buf.append(CallKind::Free, 1, 0, 0, 0));
  CHECK(buf.dropped() == 1);
}

#include "allocators/registry.h"
#include "import/trace_import.h"
#include "sim/replay.h"
#include "sim/replay_simulated.h"
#include "traces/trace_io.h"

TEST_CASE("recorder: traces recorded on the GPU machine replay through every policy", "[recorder]") {
  // Recorded with libfraglab_record.so on an H100 (docs/recorder.md): the project's example
  // program (every interposed call, three streams) and a PyTorch training script (its
  // caching allocator's segment-level cudaMalloc/cudaFree).
  for (const char* name : {"record_example.jsonl", "torch_example.jsonl"}) {
    Trace trace = load_trace(std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/recorder/" + name);
    REQUIRE(!trace.events.empty());
    for (const auto& info : policy_registry()) {
      INFO(name << " through " << info.name);
      ReplayOptions options;
      options.check_invariants = true;
      MemorySource source(trace);
      ReplayResult r =
          replay_simulated(source, PolicySpec::parse(info.name), SimDeviceConfig{}, options, &trace.events);
      CHECK(r.ooms.empty());
      CHECK(r.allocs == r.frees + (std::string(name) == "torch_example.jsonl" ? 10 : 0));
      CHECK(r.reserved.bytes >= r.requested.bytes);
    }
  }
}
