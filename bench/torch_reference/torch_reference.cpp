// torch_reference: replays an op list through PyTorch's own CUDA caching allocator
// (c10::cuda::CUDACachingAllocator, the allocator behind every torch.empty on a GPU),
// timing each call and reading the allocator's own statistics. It is the real anchor
// that fraglab's `pytorch` policy, replayed with `fraglab replay --device cuda`, is
// measured against.
//
// Input: the plain op list `fraglab ops TRACE -o OPS` writes (format below), so this
// program needs nothing but PyTorch and the CUDA runtime:
//   fraglab-ops 1
//   streams N H0 H1 ...        recorded stream handles; handle 0 is the default stream
//   a ID SIZE STREAM           allocate SIZE bytes on stream index STREAM as id ID
//   f ID                       free id ID
//   e                          empty the cache (torch.cuda.empty_cache)
// Lines starting with '#' are comments. The allocator's settings come from the
// environment, as in PyTorch: run it with the same PYTORCH_CUDA_ALLOC_CONF as the
// recording (the op list's comments say what that was).
//
// Output: one JSON object on stdout (latency of raw_alloc_with_stream / raw_delete,
// reserved and allocated peaks from c10's DeviceStats, the driver's view from
// cudaMemGetInfo, free device memory before and after).
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ops_list.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace alloc = c10::cuda::CUDACachingAllocator;

// The op-list reader the peer runners share (tools/peers/ops_list.h: format, limits, file:line errors).
using peers::Op;
using peers::OpList;
using peers::read_ops;

struct Latency {
  std::vector<uint64_t> ns;
  std::string json() const {
    if (ns.empty()) return "{\"count\": 0}";
    std::vector<uint64_t> s = ns;
    std::sort(s.begin(), s.end());
    auto rank = [&](double p) {
      size_t r = static_cast<size_t>(std::ceil(p * static_cast<double>(s.size())));
      return s[std::clamp<size_t>(r, 1, s.size()) - 1];
    };
    long double sum = 0;
    for (uint64_t v : s) sum += v;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "{\"count\": %zu, \"mean_ns\": %.1f, \"p50_ns\": %llu, \"p99_ns\": %llu, \"max_ns\": %llu}", s.size(),
                  static_cast<double>(sum / s.size()), static_cast<unsigned long long>(rank(0.5)),
                  static_cast<unsigned long long>(rank(0.99)), static_cast<unsigned long long>(s.back()));
    return buf;
  }
};

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::cerr << "torch_reference: " << what << ": " << cudaGetErrorString(status) << "\n";
  std::exit(2);
}

uint64_t free_memory() {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

// c10's StatArray is indexed by StatType; AGGREGATE (all pools together) is index 0.
constexpr size_t kAggregate = 0;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: torch_reference OPS [--touch] [--device N]\n";
    return 2;
  }
  std::string path = argv[1];
  bool touch = false;
  int device = 0;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--touch")
      touch = true;
    else if (a == "--device" && i + 1 < argc)
      device = std::atoi(argv[++i]);
    else {
      std::cerr << "torch_reference: unknown argument " << a << "\n";
      return 2;
    }
  }
  OpList list = read_ops(path);

  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaFree(nullptr), "cudaFree(0)");
  alloc::CUDAAllocator* allocator = alloc::get();
  if (!allocator->initialized()) allocator->init(c10::cuda::device_count());

  // Real streams for the trace's streams (the caching allocator keeps blocks per stream);
  // the recorded default stream stays the default stream.
  std::vector<cudaStream_t> streams;
  for (uint64_t handle : list.streams) {
    cudaStream_t s = nullptr;
    if (handle != 0) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    streams.push_back(s);
  }
  // Warm up what the runtime loads lazily, so it is not counted as the allocator's.
  void* scratch = nullptr;
  check(cudaMalloc(&scratch, 2 << 20), "cudaMalloc");
  for (cudaStream_t s : streams) check(cudaMemsetAsync(scratch, 0, 2 << 20, s), "cudaMemsetAsync");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check(cudaFree(scratch), "cudaFree");

  uint64_t free_before = free_memory();
  uint64_t driver_peak = 0;
  int64_t reserved_seen = 0;
  std::vector<void*> live;
  Latency mallocs, frees;
  uint64_t allocs = 0, deletes = 0, empties = 0, ooms = 0;
  auto start = Clock::now();
  for (const Op& op : list.ops) {
    if (op.kind == 'a') {
      if (op.id >= live.size()) live.resize(op.id + 1, nullptr);
      void* p = nullptr;
      try {
        auto t0 = Clock::now();
        p = allocator->raw_alloc_with_stream(op.size, streams[op.stream]);
        mallocs.ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
      } catch (const c10::Error& e) {
        ++ooms;
        std::cerr << "torch_reference: allocation of " << op.size << " bytes failed: " << e.what_without_backtrace()
                  << "\n";
        break;
      }
      live[op.id] = p;
      ++allocs;
      if (touch && p && op.size) check(cudaMemsetAsync(p, 0xA5, op.size, streams[op.stream]), "cudaMemsetAsync");
      // Sample the driver only when the allocator took more memory: that is when it can peak.
      int64_t reserved = allocator->getDeviceStats(device).reserved_bytes[kAggregate].current;
      if (reserved > reserved_seen) driver_peak = std::max(driver_peak, free_before - free_memory());
      reserved_seen = reserved;
    } else if (op.kind == 'f') {
      if (op.id >= live.size() || !live[op.id]) continue;  // its allocation was not made
      auto t0 = Clock::now();
      allocator->raw_delete(live[op.id]);
      frees.ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
      live[op.id] = nullptr;
      ++deletes;
      reserved_seen = allocator->getDeviceStats(device).reserved_bytes[kAggregate].current;
    } else {
      allocator->emptyCache();
      ++empties;
      reserved_seen = allocator->getDeviceStats(device).reserved_bytes[kAggregate].current;
    }
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  auto stats = allocator->getDeviceStats(device);
  for (void* p : live)
    if (p) allocator->raw_delete(p);
  allocator->emptyCache();
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  uint64_t free_after = free_memory();

  const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  std::printf(
      "{\"tool\": \"torch_reference\", \"ops\": \"%s\", \"gpu\": \"%s\", \"allocator\": \"%s\", "
      "\"PYTORCH_CUDA_ALLOC_CONF\": \"%s\", \"touch\": %s, \"allocs\": %llu, \"frees\": %llu, \"empty_caches\": %llu, "
      "\"ooms\": %llu,\n \"latency\": {\"malloc\": %s, \"free\": %s},\n"
      " \"reserved_peak\": {\"c10\": %lld, \"driver\": %llu}, \"allocated_peak\": %lld, \"requested_peak\": %lld, "
      "\"num_device_alloc\": %lld, \"num_device_free\": %lld,\n"
      " \"free_memory\": {\"before\": %llu, \"after\": %llu, \"returned\": %s}, \"replay_seconds\": %.3f}\n",
      path.c_str(), props.name, allocator->name().c_str(), conf ? conf : "", touch ? "true" : "false",
      static_cast<unsigned long long>(allocs), static_cast<unsigned long long>(deletes),
      static_cast<unsigned long long>(empties), static_cast<unsigned long long>(ooms), mallocs.json().c_str(),
      frees.json().c_str(), static_cast<long long>(stats.reserved_bytes[kAggregate].peak),
      static_cast<unsigned long long>(driver_peak), static_cast<long long>(stats.allocated_bytes[kAggregate].peak),
      static_cast<long long>(stats.requested_bytes[kAggregate].peak), static_cast<long long>(stats.num_device_alloc),
      static_cast<long long>(stats.num_device_free), static_cast<unsigned long long>(free_before),
      static_cast<unsigned long long>(free_after), free_before == free_after ? "true" : "false", seconds);
  for (cudaStream_t s : streams)
    if (s) cudaStreamDestroy(s);
  return ooms ? 1 : 0;
}
