// async_reference: replays a fraglab op list through CUDA's stream-ordered allocator
// (cudaMallocFromPoolAsync / cudaFreeAsync) on a fresh cudaMemPool_t, the real pool behind
// fraglab's cuda_async policy.
//
//   async_reference OPS [--threshold BYTES|max] [--sync-after-free]
//
// --threshold sets cudaMemPoolAttrReleaseThreshold (default 0, cuda_async's default; `max`
// is what PyTorch's cudaMallocAsync backend sets). The driver releases memory above the
// threshold only at synchronisation points; --sync-after-free synchronises the freeing
// stream after every free, the points where the cuda_async model releases. Each trace
// stream gets a CUDA stream (handle 0: the legacy default stream); default reuse policies.
// 'e' is cudaDeviceSynchronize + cudaMemPoolTrimTo(pool, 0), as the model's empty_cache.
// Output: one JSON object: the pool's ReservedMemHigh / UsedMemHigh, how many times the
// reserved size grew (sampled after each allocation) and free device memory before/after.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops_list.h"

namespace {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "async_reference: %s: %s\n", what, cudaGetErrorString(status));
  std::exit(2);
}

uint64_t attr(cudaMemPool_t pool, cudaMemPoolAttr a) {
  uint64_t v = 0;
  check(cudaMemPoolGetAttribute(pool, a, &v), "cudaMemPoolGetAttribute");
  return v;
}

uint64_t free_memory() {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: async_reference OPS [--threshold BYTES|max] [--sync-after-free]\n");
    return 2;
  }
  std::string path = argv[1];
  uint64_t threshold = 0;
  bool sync_after_free = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threshold" && i + 1 < argc) {
      std::string v = argv[++i];
      threshold = v == "max" ? std::numeric_limits<uint64_t>::max() : std::stoull(v);
    } else if (a == "--sync-after-free") {
      sync_after_free = true;
    } else {
      std::fprintf(stderr, "async_reference: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  peers::OpList list = peers::read_ops(path);
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "cudaFree(0)");
  std::vector<cudaStream_t> streams;
  for (uint64_t handle : list.streams) {
    cudaStream_t s = nullptr;
    if (handle != 0) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    streams.push_back(s);
  }
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), "release threshold");
  uint64_t free_before = free_memory();

  struct Live {
    void* ptr = nullptr;
    uint32_t stream = 0;
  };
  std::vector<Live> live;
  uint64_t allocs = 0, frees = 0, empties = 0, ooms = 0, growths = 0, reserved_seen = 0;
  for (const peers::Op& op : list.ops) {
    if (op.kind == 'a') {
      if (op.id >= live.size()) live.resize(op.id + 1);
      void* p = nullptr;
      cudaError_t st = cudaMallocFromPoolAsync(&p, op.size, pool, streams[op.stream]);
      if (st != cudaSuccess) {
        ++ooms;
        std::fprintf(stderr, "async_reference: %llu bytes: %s\n", (unsigned long long)op.size, cudaGetErrorString(st));
        break;
      }
      live[op.id] = Live{p, op.stream};
      ++allocs;
      uint64_t reserved = attr(pool, cudaMemPoolAttrReservedMemCurrent);
      if (reserved > reserved_seen) ++growths;
      reserved_seen = reserved;
    } else if (op.kind == 'f') {
      if (op.id >= live.size() || !live[op.id].ptr) continue;
      check(cudaFreeAsync(live[op.id].ptr, streams[live[op.id].stream]), "cudaFreeAsync");
      if (sync_after_free) check(cudaStreamSynchronize(streams[live[op.id].stream]), "cudaStreamSynchronize");
      live[op.id] = Live{};
      ++frees;
      reserved_seen = attr(pool, cudaMemPoolAttrReservedMemCurrent);
    } else {
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
      ++empties;
      reserved_seen = attr(pool, cudaMemPoolAttrReservedMemCurrent);
    }
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  uint64_t reserved_high = attr(pool, cudaMemPoolAttrReservedMemHigh);
  uint64_t used_high = attr(pool, cudaMemPoolAttrUsedMemHigh);
  for (Live& l : live)
    if (l.ptr) check(cudaFreeAsync(l.ptr, streams[l.stream]), "cudaFreeAsync");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check(cudaMemPoolDestroy(pool), "cudaMemPoolDestroy");
  uint64_t free_after = free_memory();
  for (cudaStream_t s : streams)
    if (s) cudaStreamDestroy(s);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceProp dp{};
  check(cudaGetDeviceProperties(&dp, 0), "cudaGetDeviceProperties");
  std::printf(
      "{\"tool\": \"async_reference\", \"peer\": \"cudaMallocAsync, CUDA driver %d runtime %d\", \"ops\": \"%s\", "
      "\"gpu\": \"%s\", \"release_threshold\": %llu, \"sync_after_free\": %s, \"allocs\": %llu, \"frees\": %llu, "
      "\"empty_caches\": %llu, \"ooms\": %llu, \"reserved_peak\": %llu, \"used_peak\": %llu, \"reserved_growths\": %llu, "
      "\"free_memory\": {\"before\": %llu, \"after\": %llu}}\n",
      driver, runtime, path.c_str(), dp.name, (unsigned long long)threshold, sync_after_free ? "true" : "false",
      (unsigned long long)allocs, (unsigned long long)frees, (unsigned long long)empties, (unsigned long long)ooms,
      (unsigned long long)reserved_high, (unsigned long long)used_high, (unsigned long long)growths,
      (unsigned long long)free_before, (unsigned long long)free_after);
  return ooms ? 1 : 0;
}
