// Records a real RMM memory event log: rmm::mr::logging_resource_adaptor over
// rmm::mr::pool_memory_resource over rmm::mr::cuda_memory_resource, driven by a small
// training-like allocation pattern from two host threads on two CUDA streams (plus a little
// setup on the default stream from the main thread). The CSV it writes is the format RMM's
// replay benchmark reads; fraglab bundles one as tests/data/rmm_log_h100.csv.
//
// Build and run on a GPU machine: see tools/rmm_log/README.md (RMM and spdlog/fmt headers are
// not part of this repository).
//
//   record_rmm_log OUT.csv [steps=6] [seed=1]
#include <rmm/mr/device/cuda_memory_resource.hpp>
#include <rmm/mr/device/logging_resource_adaptor.hpp>
#include <rmm/mr/device/pool_memory_resource.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t err__ = (call);                                                           \
    if (err__ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err__)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

__global__ void touch(char* p, std::size_t n) {
  std::size_t i = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4096;
  if (i < n) p[i] = 1;
}

struct Block {
  void* ptr;
  std::size_t size;
};

// Rounds to what a framework would ask for: 512-byte multiples, with odd tails now and then.
std::size_t jitter(std::mt19937_64& rng, std::size_t base) {
  std::uniform_real_distribution<double> f(0.6, 1.4);
  auto s = static_cast<std::size_t>(static_cast<double>(base) * f(rng));
  s = (s + 511) / 512 * 512;
  if (rng() % 7 == 0) s += 8 * (rng() % 60);  // unaligned request sizes happen
  return s == 0 ? 512 : s;
}

template <typename MR>
void* alloc(MR& mr, std::size_t size, cudaStream_t stream) {
  void* p = mr.allocate(size, stream);
  unsigned blocks = static_cast<unsigned>((size / 4096 + 255) / 256);
  touch<<<blocks == 0 ? 1 : blocks, 256, 0, stream>>>(static_cast<char*>(p), size);
  return p;
}

// One "trainer": parameters allocated once, then `steps` steps of a forward pass (activations
// grow layer by layer, with short-lived workspaces), a backward pass (activations freed in
// reverse, gradients allocated), and an optimizer step that frees the gradients.
template <typename MR>
void trainer(MR& mr, cudaStream_t stream, int layers, std::size_t width, int steps, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<Block> weights;
  for (int l = 0; l < layers; ++l) {
    std::size_t w = jitter(rng, width * width / 64);
    weights.push_back({alloc(mr, w, stream), w});
    std::size_t b = jitter(rng, width * 4);
    weights.push_back({alloc(mr, b, stream), b});
  }
  for (int step = 0; step < steps; ++step) {
    std::size_t batch = 32u << (rng() % 3);  // the batch size varies from step to step
    std::vector<Block> acts;
    for (int l = 0; l < layers; ++l) {
      std::size_t a = jitter(rng, batch * width * 4 * (1 + l % 3));
      acts.push_back({alloc(mr, a, stream), a});
      if (rng() % 2) {  // a workspace that lives for one layer
        std::size_t ws = jitter(rng, 1u << (12 + rng() % 10));
        void* p = alloc(mr, ws, stream);
        mr.deallocate(p, ws, stream);
      }
      if (l % 4 == 3) {  // a small tensor kept for backward
        std::size_t m = jitter(rng, batch * 64);
        acts.push_back({alloc(mr, m, stream), m});
      }
    }
    std::vector<Block> grads;
    for (auto it = acts.rbegin(); it != acts.rend(); ++it) {
      std::size_t g = jitter(rng, it->size / 2);
      grads.push_back({alloc(mr, g, stream), g});
      mr.deallocate(it->ptr, it->size, stream);
    }
    for (auto& g : grads) mr.deallocate(g.ptr, g.size, stream);
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  for (auto it = weights.rbegin(); it != weights.rend(); ++it) mr.deallocate(it->ptr, it->size, stream);
  CHECK_CUDA(cudaStreamSynchronize(stream));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.csv [steps=6] [seed=1]\n", argv[0]);
    return 2;
  }
  std::string const path = argv[1];
  int const steps = argc > 2 ? std::atoi(argv[2]) : 6;
  unsigned const seed = argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 1u;

  rmm::mr::cuda_memory_resource cuda_mr;
  // 256 MiB to start, growing (pool_memory_resource doubles) up to 4 GiB.
  rmm::mr::pool_memory_resource<rmm::mr::cuda_memory_resource> pool(&cuda_mr, std::size_t{256} << 20,
                                                                    std::size_t{4} << 30);
  {
    rmm::mr::logging_resource_adaptor<decltype(pool)> log(&pool, path);

    // Setup on the default stream from the main thread: an embedding table and a scratch buffer.
    void* table = log.allocate(std::size_t{24} << 20);
    void* scratch = log.allocate(3 * 1000 * 1000 + 17);

    cudaStream_t s1{}, s2{};
    CHECK_CUDA(cudaStreamCreate(&s1));
    CHECK_CUDA(cudaStreamCreate(&s2));
    std::thread t1([&] { trainer(log, s1, 12, 1024, steps, seed * 2 + 1); });
    std::thread t2([&] { trainer(log, s2, 8, 768, steps, seed * 2 + 2); });
    t1.join();
    t2.join();

    log.deallocate(scratch, 3 * 1000 * 1000 + 17);
    log.deallocate(table, std::size_t{24} << 20);
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaStreamDestroy(s1));
    CHECK_CUDA(cudaStreamDestroy(s2));
    log.flush();
  }
  std::printf("wrote %s\n", path.c_str());
  return 0;
}
