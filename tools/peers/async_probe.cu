// async_probe: small fixed patterns through cudaMallocFromPoolAsync on fresh pools (release
// threshold max, one stream), printing the pool's reserved size and where each block landed
// (offset from the first block), to measure what the driver does that its documentation does
// not say: how the reserved size grows, and which free range a request reuses.
//   async_probe            one JSON object per pattern on stdout
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace {

void check(cudaError_t s, const char* what) {
  if (s == cudaSuccess) return;
  std::fprintf(stderr, "async_probe: %s: %s\n", what, cudaGetErrorString(s));
  std::exit(2);
}

struct Pool {
  cudaMemPool_t pool = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<void*> ptrs;
  std::string log;
  Pool() {
    cudaMemPoolProps p{};
    p.allocType = cudaMemAllocationTypePinned;
    p.location.type = cudaMemLocationTypeDevice;
    p.location.id = 0;
    check(cudaMemPoolCreate(&pool, &p), "create");
    uint64_t max = std::numeric_limits<uint64_t>::max();
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &max), "threshold");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  }
  ~Pool() {
    for (void* p : ptrs)
      if (p) cudaFreeAsync(p, stream);
    cudaStreamSynchronize(stream);
    cudaMemPoolDestroy(pool);
    cudaStreamDestroy(stream);
  }
  uint64_t reserved() {
    uint64_t v = 0;
    check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v), "attr");
    return v;
  }
  // Allocates; logs [size, offset from block 0, reserved after].
  size_t alloc(uint64_t size) {
    void* p = nullptr;
    check(cudaMallocFromPoolAsync(&p, size, pool, stream), "malloc");
    ptrs.push_back(p);
    long long off = (long long)((char*)p - (char*)ptrs[0]);
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s[\"a\", %llu, %lld, %llu]", log.empty() ? "" : ", ", (unsigned long long)size,
                  off, (unsigned long long)reserved());
    log += buf;
    return ptrs.size() - 1;
  }
  void free(size_t i) {
    check(cudaFreeAsync(ptrs[i], stream), "free");
    ptrs[i] = nullptr;
    char buf[64];
    std::snprintf(buf, sizeof buf, ", [\"f\", %zu, %llu]", i, (unsigned long long)reserved());
    log += buf;
  }
  void print(const char* name) { std::printf("{\"pattern\": \"%s\", \"ops\": [%s]}\n", name, log.c_str()); }
};

constexpr unsigned long long MiB = 1ull << 20;

}  // namespace

int main() {
  check(cudaSetDevice(0), "device");
  check(cudaFree(nullptr), "init");
  for (uint64_t size : {512ull, 1 * MiB, 2 * MiB, 2 * MiB + 512, 20 * MiB, 31 * MiB, 32 * MiB, 33 * MiB, 48 * MiB,
                        64 * MiB, 65 * MiB, 100 * MiB, 1024 * MiB}) {
    Pool p;
    p.alloc(size);
    p.print(("single " + std::to_string(size)).c_str());
  }
  {  // growth: 1 MiB at a time
    Pool p;
    for (int i = 0; i < 40; ++i) p.alloc(MiB);
    p.print("forty 1 MiB");
  }
  {  // growth: 10 MiB at a time
    Pool p;
    for (int i = 0; i < 10; ++i) p.alloc(10 * MiB);
    p.print("ten 10 MiB");
  }
  {  // which hole: A 10 MiB, B 1 MiB, C 20 MiB, D 1 MiB; free A and C; then 8 MiB, 8 MiB, 15 MiB
    Pool p;
    size_t a = p.alloc(10 * MiB);
    p.alloc(MiB);
    size_t c = p.alloc(20 * MiB);
    p.alloc(MiB);
    p.free(a);
    p.free(c);
    p.alloc(8 * MiB);
    p.alloc(8 * MiB);
    p.alloc(15 * MiB);
    p.print("holes");
  }
  {  // a freed big block reused by a smaller request, then a request that fits nowhere
    Pool p;
    size_t a = p.alloc(64 * MiB);
    p.alloc(64 * MiB);
    p.free(a);
    p.alloc(32 * MiB);
    p.alloc(40 * MiB);
    p.alloc(24 * MiB);
    p.print("reuse");
  }
  return 0;
}
