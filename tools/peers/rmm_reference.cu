// rmm_reference: replays a fraglab op list through RAPIDS RMM's own memory resources, the
// real allocators behind fraglab's rmm_pool, rmm_arena and rmm_binning policies:
//   pool     pool_memory_resource(upstream, initial_pool_size = 0)       (rmm_pool's defaults)
//   arena    arena_memory_resource(upstream[, arena_size])                (rmm_arena; default:
//            half the free device memory at construction)
//   binning  binning_memory_resource(pool, 18, 22) over pool_memory_resource(upstream, 0)
//            (rmm_binning's defaults; larger requests go to the pool)
// where upstream = statistics_resource_adaptor over cuda_memory_resource (cudaMalloc): its
// byte counter's peak is the peak reserved memory, its allocation count the device calls.
// RMM is v25.10.00, built header-only by tools/peers/build.sh (see tools/peers/README.md).
//
//   rmm_reference OPS pool|arena|binning [--arena-size BYTES]
//
// Each trace stream gets a CUDA stream (handle 0: the default stream, which RMM files under
// cudaStreamLegacy); a block is freed on the stream it was allocated on, as in the trace.
// 'e' (empty the cache) has no RMM counterpart (RMM returns memory only when a resource is
// destroyed): it is counted and skipped. 0-byte requests return nullptr in RMM: counted.
// Output: one JSON object on stdout.
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/device/arena_memory_resource.hpp>
#include <rmm/mr/device/binning_memory_resource.hpp>
#include <rmm/mr/device/cuda_memory_resource.hpp>
#include <rmm/mr/device/pool_memory_resource.hpp>
#include <rmm/mr/device/statistics_resource_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops_list.h"

namespace {

using Upstream = rmm::mr::statistics_resource_adaptor<rmm::mr::cuda_memory_resource>;
using Pool = rmm::mr::pool_memory_resource<Upstream>;

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "rmm_reference: %s: %s\n", what, cudaGetErrorString(status));
  std::exit(2);
}

uint64_t free_memory() {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

struct Result {
  uint64_t allocs = 0, frees = 0, zero_size = 0, empties_skipped = 0, ooms = 0;
  uint64_t requested_peak = 0;
  std::string oom_message;
};

// Replays the op list through `mr`; the resource under test sits on top.
Result replay(const peers::OpList& list, rmm::mr::device_memory_resource& mr,
              const std::vector<rmm::cuda_stream_view>& streams) {
  Result r;
  struct Live {
    void* ptr = nullptr;
    uint64_t size = 0;
    uint32_t stream = 0;
  };
  std::vector<Live> live;
  uint64_t requested = 0;
  for (const peers::Op& op : list.ops) {
    if (op.kind == 'a') {
      if (op.id >= live.size()) live.resize(op.id + 1);
      if (op.size == 0) ++r.zero_size;
      void* p = nullptr;
      try {
        p = mr.allocate(op.size, streams[op.stream]);
      } catch (const std::exception& e) {
        ++r.ooms;
        r.oom_message = e.what();
        break;
      }
      live[op.id] = Live{p, op.size, op.stream};
      ++r.allocs;
      requested += op.size;
      r.requested_peak = std::max(r.requested_peak, requested);
    } else if (op.kind == 'f') {
      if (op.id >= live.size() || !live[op.id].ptr) continue;  // 0 bytes, or never made
      Live& l = live[op.id];
      mr.deallocate(l.ptr, l.size, streams[l.stream]);
      requested -= l.size;
      l = Live{};
      ++r.frees;
    } else {
      ++r.empties_skipped;
    }
  }
  for (Live& l : live)
    if (l.ptr) mr.deallocate(l.ptr, l.size, streams[l.stream]);
  return r;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n') ? ' ' : c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: rmm_reference OPS pool|arena|binning [--arena-size BYTES]\n");
    return 2;
  }
  std::string path = argv[1], kind = argv[2];
  std::optional<std::size_t> arena_size;
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--arena-size" && i + 1 < argc)
      arena_size = std::stoull(argv[++i]);
    else {
      std::fprintf(stderr, "rmm_reference: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (kind != "pool" && kind != "arena" && kind != "binning") {
    std::fprintf(stderr, "rmm_reference: unknown resource %s\n", kind.c_str());
    return 2;
  }
  peers::OpList list = peers::read_ops(path);
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "cudaFree(0)");
  std::vector<cudaStream_t> raw;
  std::vector<rmm::cuda_stream_view> streams;
  for (uint64_t handle : list.streams) {
    cudaStream_t s = nullptr;
    if (handle != 0) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    raw.push_back(s);
    streams.emplace_back(s);
  }
  uint64_t free_before = free_memory();

  rmm::mr::cuda_memory_resource cuda;
  Upstream upstream{&cuda};
  Result r;
  uint64_t arena_bytes = 0;
  {
    std::unique_ptr<Pool> pool;
    std::unique_ptr<rmm::mr::device_memory_resource> top;
    if (kind == "pool") {
      top = std::make_unique<Pool>(&upstream, 0);
    } else if (kind == "arena") {
      top = std::make_unique<rmm::mr::arena_memory_resource<Upstream>>(&upstream, arena_size);
      arena_bytes = upstream.get_bytes_counter().value;
    } else {
      pool = std::make_unique<Pool>(&upstream, 0);
      top = std::make_unique<rmm::mr::binning_memory_resource<Pool>>(pool.get(), 18, 22);
    }
    r = replay(list, *top, streams);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }  // the resources give everything back here
  auto bytes = upstream.get_bytes_counter();
  auto calls = upstream.get_allocations_counter();
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  uint64_t free_after = free_memory();
  for (cudaStream_t s : raw)
    if (s) cudaStreamDestroy(s);

  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
  std::printf(
      "{\"tool\": \"rmm_reference\", \"peer\": \"rmm %s\", \"resource\": \"%s\", \"ops\": %s, \"gpu\": %s, "
      "\"allocs\": %llu, \"frees\": %llu, \"zero_size_requests\": %llu, \"empty_caches_skipped\": %llu, "
      "\"ooms\": %llu, \"oom_message\": %s, \"arena_size\": %llu, "
      "\"reserved_peak\": %lld, \"device_allocs\": %lld, \"requested_peak\": %llu, "
      "\"free_memory\": {\"before\": %llu, \"after\": %llu}}\n",
      RMM_REFERENCE_VERSION, kind.c_str(), json_string(path).c_str(), json_string(props.name).c_str(),
      (unsigned long long)r.allocs, (unsigned long long)r.frees, (unsigned long long)r.zero_size,
      (unsigned long long)r.empties_skipped, (unsigned long long)r.ooms, json_string(r.oom_message).c_str(),
      (unsigned long long)arena_bytes, (long long)bytes.peak, (long long)calls.total,
      (unsigned long long)r.requested_peak, (unsigned long long)free_before, (unsigned long long)free_after);
  return r.ooms ? 1 : 0;
}
