// A small CUDA program for checking libfraglab_record.so: a few "layers" of activations
// allocated and freed in a training-like order on two streams, through every runtime
// call the recorder interposes. Built against the shared CUDA runtime (the recorder
// cannot see a statically linked one). Run:
//   FRAGLAB_RECORD_OUT=example.jsonl LD_PRELOAD=libfraglab_record.so ./record_example
// It prints what it did, so the recorded trace can be checked against it.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "record_example: %s: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

}  // namespace

int main() {
  cudaStream_t compute = nullptr, copy = nullptr;
  check(cudaStreamCreate(&compute), "cudaStreamCreate");
  check(cudaStreamCreate(&copy), "cudaStreamCreate");
  cudaMemPool_t pool = nullptr;
  check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");

  const int layers = 4, steps = 3;
  int allocs = 0, frees = 0;
  void* weights = nullptr;
  check(cudaMalloc(&weights, 64u << 20), "cudaMalloc weights");
  ++allocs;
  for (int step = 0; step < steps; ++step) {
    std::vector<void*> activations;
    for (int l = 0; l < layers; ++l) {  // forward: activations pile up
      void* a = nullptr;
      check(cudaMallocAsync(&a, (8u << 20) * (l + 1), compute), "cudaMallocAsync");
      check(cudaMemsetAsync(a, l, (8u << 20) * (l + 1), compute), "cudaMemsetAsync");
      activations.push_back(a);
      ++allocs;
    }
    void* staging = nullptr;  // a prefetch buffer on the side stream
    check(cudaMallocFromPoolAsync(&staging, 3u << 20, pool, copy), "cudaMallocFromPoolAsync");
    ++allocs;
    for (int l = layers - 1; l >= 0; --l) {  // backward: gradients come and go, activations go
      void* g = nullptr;
      check(cudaMalloc(&g, 1000 + l), "cudaMalloc grad");
      ++allocs;
      check(cudaFree(g), "cudaFree grad");
      ++frees;
      check(cudaFreeAsync(activations[l], compute), "cudaFreeAsync");
      ++frees;
    }
    check(cudaFreeAsync(staging, copy), "cudaFreeAsync staging");
    ++frees;
  }
  check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
  check(cudaStreamSynchronize(copy), "cudaStreamSynchronize");
  check(cudaFree(weights), "cudaFree weights");
  ++frees;
  std::printf("record_example: %d allocations, %d frees on 3 streams\n", allocs, frees);
  return 0;
}
