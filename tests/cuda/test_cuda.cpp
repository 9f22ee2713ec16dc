// The CUDA device and the real-GPU replay. On a machine without a GPU (or a build
// without CUDA) the GPU tests pass with a warning saying they were skipped and why.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#if FRAGLAB_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>

#include "cuda/cuda_device.h"
#include "cuda/cuda_replay.h"
#endif

namespace {

int run_cli(const std::string& args, const std::string& stdout_to = "/dev/null") {
  int status = std::system((std::string(FRAGLAB_CLI) + " " + args + " >" + stdout_to + " 2>/dev/null").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string small_trace_file() {
  std::string path = (std::filesystem::temp_directory_path() / "fraglab_test_cuda_small.jsonl").string();
  std::ofstream out(path);
  out << R"({"fraglab_trace": 1, "streams": [0, 7]})"
         "\n"
      << R"({"op": "alloc", "id": 1, "size": 1000, "stream": 0})"
         "\n"
      << R"({"op": "free", "id": 1})"
         "\n";
  return path;
}

}  // namespace

TEST_CASE("replay --device accepts sim and cuda[:N], nothing else; --gpu picks the snapshot's GPU", "[cuda][cli]") {
  std::string trace = small_trace_file();
  CHECK(run_cli("replay " + trace + " --gpu 0") == 0);
  CHECK(run_cli("replay " + trace + " --device 0") == 2);  // once the snapshot's GPU too: now --gpu alone
  CHECK(run_cli("replay " + trace + " --device sim") == 0);
  CHECK(run_cli("replay " + trace + " --device gpu") == 2);
  CHECK(run_cli("replay " + trace + " --device cuda:x") == 2);
}

#if !FRAGLAB_HAVE_CUDA

TEST_CASE("CUDA device", "[cuda]") { WARN("skipped: fraglab was built without CUDA (FRAGLAB_CUDA=OFF or no toolkit)"); }

#else

namespace {

using namespace fraglab;
using fraglab::cuda::CudaDevice;

bool gpu_or_skip() {
  std::string why;
  if (CudaDevice::available(&why)) return true;
  WARN("skipped: no usable GPU here (" << why << ")");
  return false;
}

// A trace with two streams, a reused size class and an empty_cache in the middle.
Trace small_trace() {
  Trace t;
  t.meta.streams = {0, 7};
  auto alloc = [&](AllocId id, uint64_t size, StreamIndex s) {
    t.events.push_back(Event{EventKind::Alloc, s, id, size, 0, 0, 0});
  };
  auto free = [&](AllocId id) { t.events.push_back(Event{EventKind::Free, 0, id, 0, 0, 0, 0}); };
  alloc(0, 3u << 20, 0);
  alloc(1, 700, 1);
  alloc(2, 40u << 20, 0);
  free(1);
  alloc(1, 512, 1);
  free(0);
  t.events.push_back(Event{EventKind::EmptyCache, 0, 0, 0, 0, 0, 0});
  alloc(0, 5u << 20, 0);
  free(2);
  free(1);
  free(0);
  return t;
}

void write_through(Addr addr, uint64_t size, unsigned char value) {
  REQUIRE(cudaMemset(reinterpret_cast<void*>(addr), value, size) == cudaSuccess);
}
unsigned char read_byte(Addr addr) {
  unsigned char b = 0;
  REQUIRE(cudaMemcpy(&b, reinterpret_cast<void*>(addr), 1, cudaMemcpyDeviceToHost) == cudaSuccess);
  return b;
}

}  // namespace

TEST_CASE("CudaDevice segments are real memory the driver sees", "[cuda]") {
  if (!gpu_or_skip()) return;
  CudaDevice device;
  auto a = device.allocate_segment(64u << 20, 0);
  REQUIRE(a);
  CHECK(device.reserved_bytes() == (64u << 20));
  CHECK(device.driver().used_now >= (64u << 20));
  write_through(*a, 64u << 20, 7);
  CHECK(read_byte(*a + (63u << 20)) == 7);
  device.free_segment(*a, 64u << 20);
  CHECK(device.reserved_bytes() == 0);
  CHECK(device.sample_driver().used_now == 0);
}

TEST_CASE("CudaDevice maps, unmaps part of and aliases VMM pages", "[cuda]") {
  if (!gpu_or_skip()) return;
  CudaDevice device;
  const uint64_t g = device.granularity();
  auto range = device.reserve_range(8 * g);
  REQUIRE(range);
  REQUIRE(device.map_pages(*range, 4 * g, 0));
  CHECK(device.reserved_bytes() == 4 * g);
  write_through(*range, 4 * g, 3);
  // cuMemUnmap can only unmap whole mappings; the device maps page by page so this works.
  device.unmap_pages(*range + g, 2 * g);
  CHECK(device.reserved_bytes() == 2 * g);
  CHECK(read_byte(*range + 3 * g) == 3);

  // The last page shows up a second time at the range's end: same memory, no new bytes.
  REQUIRE(device.alias_pages(*range + 7 * g, *range + 3 * g, g));
  CHECK(device.reserved_bytes() == 2 * g);
  write_through(*range + 7 * g, 1, 9);
  CHECK(read_byte(*range + 3 * g) == 9);
  device.unmap_pages(*range + 3 * g, g);
  CHECK(device.reserved_bytes() == 2 * g);  // still mapped once
  CHECK(read_byte(*range + 7 * g) == 9);
  device.unmap_pages(*range + 7 * g, g);
  device.unmap_pages(*range, g);
  CHECK(device.reserved_bytes() == 0);
  device.release_range(*range, 8 * g);
  CHECK(device.sample_driver().used_now == 0);
}

TEST_CASE("CudaDevice refuses past its capacity like a failed cudaMalloc", "[cuda]") {
  if (!gpu_or_skip()) return;
  CudaDevice device({0, 6ull << 20});
  auto a = device.allocate_segment(4u << 20, 0);
  REQUIRE(a);
  CHECK_FALSE(device.allocate_segment(4u << 20, 0));
  auto range = device.reserve_range(2 * device.granularity());
  REQUIRE(range);
  CHECK_FALSE(device.map_pages(*range, 2 * device.granularity(), 0));
  CHECK(device.reserved_bytes() == (4u << 20));
  CHECK(device.release_everything() == (4u << 20));
  CHECK(device.segment_count() == 0);
  CHECK(device.range_count() == 0);
}

TEST_CASE("GPU replay: policy count equals the simulator's, memory comes back", "[cuda]") {
  if (!gpu_or_skip()) return;
  Trace trace = small_trace();
  for (const char* policy : {"bestfit", "passthrough", "cuda_malloc", "cuda_malloc_async"}) {
    INFO(policy);
    cuda::CudaReplayOptions options;
    options.touch = true;
    auto r = cuda::replay_on_cuda(trace, policy, options);
    CHECK(r.counted.allocs == 5);
    CHECK(r.counted.frees == 5);
    CHECK(r.malloc_latency.count == 5);
    CHECK(r.free_latency.count == 5);
    CHECK(r.malloc_latency.max_ns >= r.malloc_latency.p50_ns);
    CHECK(r.counted.ooms.empty());
    CHECK(r.free_after == r.free_before);
    CHECK(r.driver.used_peak > 0);
    if (r.simulated && r.kind == "policy") CHECK(r.counted.reserved.bytes == r.simulated->reserved.bytes);
    if (r.kind == "cuda_malloc_async") CHECK(*r.pool_used_high >= (43u << 20));
  }
}

// A recording that ran out of memory replays on the GPU under the limit its OOMs show, as on the simulator
// (capacity_for; the limit enforced by the same adaptor, which PyTorch's model under a fraction checks
// itself): the recorded OOMs recur and the peak is the recording's. Before, the GPU served every OOM'd
// request (10,372,513,792 bytes reserved at the peak).
TEST_CASE("GPU replay: a recording's OOMs recur under the limit they show", "[cuda]") {
  if (!gpu_or_skip()) return;
  const std::string out = (std::filesystem::temp_directory_path() / "fraglab_test_cuda_oom.json").string();
  const std::string snapshot =
      std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/gpt2_oom_backoff.expandable_cap0.12.pickle.gz";
  REQUIRE(run_cli("replay " + snapshot + " --device cuda --policy pytorch --json", out) == 0);
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in)["results"][0];
  CHECK(j["counted"]["peak_reserved"] == 10162798592ull);  // the recording's peak
  CHECK(j["simulated"]["peak_reserved"] == 10162798592ull);
  CHECK(j["counted"]["recorded_ooms_served"] == 0);
  CHECK(j["counted"]["recorded_ooms"].size() == 3);
  CHECK(j["held_at_end"] == 0);
}

TEST_CASE("GPU replay: out of memory stops the run like the simulated one", "[cuda]") {
  if (!gpu_or_skip()) return;
  cuda::CudaReplayOptions options;
  options.capacity = 16ull << 20;
  auto r = cuda::replay_on_cuda(small_trace(), "passthrough", options);
  REQUIRE(r.counted.ooms.size() == 1);
  CHECK(r.counted.ooms[0].event_index == 2);
  CHECK(r.counted.stopped_on_oom);
  REQUIRE(r.simulated);
  CHECK(r.simulated->ooms.size() == 1);
  CHECK(r.free_after == r.free_before);
  CHECK_THROWS_AS(cuda::replay_on_cuda(small_trace(), "no_such_policy", options), PolicyConfigError);
}

#endif
