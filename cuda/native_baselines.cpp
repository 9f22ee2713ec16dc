#include "cuda/native_baselines.h"

#include <chrono>
#include <limits>

#include "cuda/cuda_error.h"
#include "cuda/cuda_streams.h"
#include "sim/replay_simulated.h"

namespace fraglab::cuda {

namespace {

using Clock = std::chrono::steady_clock;

// What a baseline needs to know about each live allocation (indexed by allocation id).
struct LiveTable {
  struct Entry {
    void* ptr = nullptr;
    uint64_t size = 0;
    StreamIndex stream = 0;
    bool live = false, skipped = false;
  };
  std::vector<Entry> entries;
  Entry& at(AllocId id) {
    if (id >= entries.size()) entries.resize(id + 1);
    return entries[id];
  }
};

// The counters every baseline keeps in the engine's terms, so reports line up.
struct Counter {
  ReplayResult r;
  uint64_t live = 0;

  void allocated(uint64_t size, uint64_t index) {
    ++r.allocs;
    live += size;
    if (live > r.requested.bytes) r.requested = r.allocated = r.reserved = {live, index};
  }
  void freed(uint64_t size) {
    ++r.frees;
    live -= size;
  }
  // Returns false when the replay must stop.
  bool oom(const Event& e, uint64_t index, OnOom policy) {
    ++r.allocs;
    ++r.calls.failed;
    r.ooms.push_back({index, e.size, e.stream, live, live});
    if (policy == OnOom::Skip) return true;
    r.stopped_on_oom = true;
    return false;
  }
  void finish() { r.final_reserved = r.final_allocated = r.final_requested = live; }
};

bool over_capacity(const CudaReplayOptions& options, uint64_t live, uint64_t size) {
  return options.capacity && live + size > *options.capacity;
}

void touch(void* p, uint64_t size, cudaStream_t stream) {
  if (size) FRAGLAB_CUDA_CHECK(cudaMemsetAsync(p, 0xA5, size, stream));
}

// True for an out-of-memory answer (cleared so it does not stick), false for success;
// throws for anything else.
bool out_of_memory(cudaError_t status, const char* call) {
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return true;
  }
  check(status, call);
  return false;
}

CudaReplayResult start_result(const PolicySpec& spec, const char* kind, const CudaDevice& device,
                              const CudaReplayOptions& options) {
  CudaReplayResult out;
  out.policy = spec.text;
  out.kind = kind;
  out.gpu = device.name();
  out.ordinal = device.ordinal();
  out.touched = options.touch;
  return out;
}

}  // namespace

CudaReplayResult replay_cuda_malloc(const Trace& trace, const PolicySpec& spec, const CudaReplayOptions& options) {
  spec.options.check_known("cuda_malloc", {});
  CudaDevice device({options.ordinal, options.capacity});  // for its context and the driver's view
  CudaReplayResult out = start_result(spec, "cuda_malloc", device, options);
  if (options.simulate) {
    // passthrough is the simulator's model of exactly this (one segment per request).
    SimDeviceConfig config;
    config.capacity = options.capacity;
    ReplayOptions replay;
    replay.on_oom = options.on_oom;
    MemorySource source(trace);
    out.simulated = replay_simulated(source, PolicySpec::parse("passthrough"), config, replay, &trace.events);
  }
  StreamSet streams(trace.meta.streams.size());
  warm_up(streams);
  device.reset_driver_baseline();
  out.free_before = device.driver().free_at_start;

  LiveTable table;
  Counter count;
  LatencyLog mallocs, frees;
  auto start = Clock::now();
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (!is_replay_event(e.kind)) continue;
    ++count.r.events;
    if (e.kind == EventKind::EmptyCache) {
      ++count.r.empty_caches;  // nothing is cached
    } else if (e.kind == EventKind::Alloc) {
      auto& entry = table.at(e.id);
      void* p = nullptr;
      bool oom = over_capacity(options, count.live, e.size);
      if (!oom) {
        auto t0 = Clock::now();
        cudaError_t status = cudaMalloc(&p, e.size);
        auto t1 = Clock::now();
        oom = out_of_memory(status, "cudaMalloc");
        if (!oom) mallocs.add(t1 - t0);
      }
      if (oom) {
        entry = {nullptr, 0, e.stream, false, true};
        if (!count.oom(e, i, options.on_oom)) break;
        continue;
      }
      entry = {p, e.size, e.stream, true, false};
      ++count.r.calls.segment_allocs;
      count.allocated(e.size, i);
      device.sample_driver();
      if (options.touch) touch(p, e.size, streams[e.stream]);
    } else if (e.kind == EventKind::Free) {
      auto& entry = table.at(e.id);
      if (entry.skipped) continue;
      if (!entry.live) throw std::logic_error("free of id " + std::to_string(e.id) + " which is not live");
      auto t0 = Clock::now();
      cudaError_t status = cudaFree(entry.ptr);
      frees.add(Clock::now() - t0);
      FRAGLAB_CUDA_CHECK(status);
      ++count.r.calls.segment_frees;
      count.freed(entry.size);
      entry.live = false;
      device.sample_driver();
    }
  }
  streams.synchronize();
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  count.finish();
  for (auto& entry : table.entries)
    if (entry.live) FRAGLAB_CUDA_CHECK(cudaFree(entry.ptr));
  FRAGLAB_CUDA_CHECK(cudaDeviceSynchronize());
  out.counted = count.r;
  out.counted.policy = spec.text;
  out.counted.seconds = out.seconds;
  out.malloc_latency = mallocs.summary();
  out.free_latency = frees.summary();
  out.driver = device.sample_driver();
  out.free_after = out.driver.free_now;
  return out;
}

namespace {

// PyTorch's cudaMallocAsync backend (c10/cuda/CUDAMallocAsyncAllocator.cpp) sets the
// release threshold to UINT64_MAX so the pool keeps what it has; CUDA's own default is 0
// (give memory back at every synchronization). Default here: PyTorch's.
uint64_t release_threshold(const PolicySpec& spec) {
  std::string text = spec.options.get_string("release_threshold", "max");
  if (text == "max") return std::numeric_limits<uint64_t>::max();
  return spec.options.get_size("release_threshold", 0);
}

class Pool {
 public:
  Pool(int ordinal, uint64_t threshold) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = ordinal;
    FRAGLAB_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
    FRAGLAB_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold));
  }
  ~Pool() { cudaMemPoolDestroy(pool_); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  cudaMemPool_t get() const { return pool_; }
  uint64_t attribute(cudaMemPoolAttr attr) const {
    uint64_t value = 0;
    FRAGLAB_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, attr, &value));
    return value;
  }
  void trim() const { FRAGLAB_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0)); }

 private:
  cudaMemPool_t pool_ = nullptr;
};

}  // namespace

CudaReplayResult replay_cuda_malloc_async(const Trace& trace, const PolicySpec& spec,
                                          const CudaReplayOptions& options) {
  spec.options.check_known("cuda_malloc_async",
                           {{"release_threshold", "max", "bytes the pool keeps at a synchronization (max = all)"}});
  uint64_t threshold = release_threshold(spec);
  CudaDevice device({options.ordinal, options.capacity});
  CudaReplayResult out = start_result(spec, "cuda_malloc_async", device, options);
  StreamSet streams(trace.meta.streams.size());
  warm_up(streams);
  device.reset_driver_baseline();
  out.free_before = device.driver().free_at_start;

  LiveTable table;
  Counter count;
  LatencyLog mallocs, frees;
  {
    Pool pool(options.ordinal, threshold);
    auto start = Clock::now();
    for (uint64_t i = 0; i < trace.events.size(); ++i) {
      const Event& e = trace.events[i];
      if (!is_replay_event(e.kind)) continue;
      ++count.r.events;
      if (e.kind == EventKind::EmptyCache) {
        // What torch.cuda.empty_cache does on this backend: wait, then trim the pool.
        ++count.r.empty_caches;
        streams.synchronize();
        pool.trim();
      } else if (e.kind == EventKind::Alloc) {
        auto& entry = table.at(e.id);
        void* p = nullptr;
        bool oom = over_capacity(options, count.live, e.size);
        if (!oom) {
          auto t0 = Clock::now();
          cudaError_t status = cudaMallocFromPoolAsync(&p, e.size, pool.get(), streams[e.stream]);
          auto t1 = Clock::now();
          oom = out_of_memory(status, "cudaMallocFromPoolAsync");
          if (oom) {
            // Memory freed on other streams returns to the pool only once those streams get
            // there: wait for them and try once more (PyTorch's backend does the same).
            streams.synchronize();
            t0 = Clock::now();
            status = cudaMallocFromPoolAsync(&p, e.size, pool.get(), streams[e.stream]);
            t1 = Clock::now();
            oom = out_of_memory(status, "cudaMallocFromPoolAsync");
          }
          if (!oom) mallocs.add(t1 - t0);
        }
        if (oom) {
          entry = {nullptr, 0, e.stream, false, true};
          if (!count.oom(e, i, options.on_oom)) break;
          continue;
        }
        entry = {p, e.size, e.stream, true, false};
        count.allocated(e.size, i);
        device.sample_driver();
        if (options.touch) touch(p, e.size, streams[e.stream]);
      } else if (e.kind == EventKind::Free) {
        auto& entry = table.at(e.id);
        if (entry.skipped) continue;
        if (!entry.live) throw std::logic_error("free of id " + std::to_string(e.id) + " which is not live");
        auto t0 = Clock::now();
        cudaError_t status = cudaFreeAsync(entry.ptr, streams[entry.stream]);
        frees.add(Clock::now() - t0);
        FRAGLAB_CUDA_CHECK(status);
        count.freed(entry.size);
        entry.live = false;
        device.sample_driver();
      }
    }
    streams.synchronize();
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    count.finish();
    for (auto& entry : table.entries)
      if (entry.live) FRAGLAB_CUDA_CHECK(cudaFreeAsync(entry.ptr, streams[entry.stream]));
    streams.synchronize();
    out.pool_reserved_high = pool.attribute(cudaMemPoolAttrReservedMemHigh);
    out.pool_used_high = pool.attribute(cudaMemPoolAttrUsedMemHigh);
    pool.trim();
  }  // the pool is destroyed here
  FRAGLAB_CUDA_CHECK(cudaDeviceSynchronize());
  out.counted = count.r;
  out.counted.policy = spec.text;
  out.counted.seconds = out.seconds;
  out.malloc_latency = mallocs.summary();
  out.free_latency = frees.summary();
  out.driver = device.sample_driver();
  out.free_after = out.driver.free_now;
  return out;
}

}  // namespace fraglab::cuda
