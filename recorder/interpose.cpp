// libfraglab_record.so: records the CUDA runtime allocation calls of an unmodified
// program. Use:
//   FRAGLAB_RECORD_OUT=trace.jsonl LD_PRELOAD=libfraglab_record.so ./program
// It defines cudaMalloc, cudaFree, cudaMallocAsync, cudaFreeAsync and
// cudaMallocFromPoolAsync; the dynamic linker binds the program's calls to these (a
// preloaded library comes first in every lookup), and each forwards to the real runtime
// function found with dlsym(RTLD_NEXT) and appends one record to a RecordBuffer. At exit
// the records become a trace, written through fraglab's writers (format by the output's
// extension) into a temporary file renamed into place: a crash mid-write leaves no
// half-written trace behind.
//
// What it cannot see (docs/recorder.md): programs linked with the static CUDA runtime
// (nvcc's default; build with -cudart shared), and memory obtained through the driver
// API (cuMemAlloc, or cuMemCreate/cuMemMap as PyTorch's expandable segments do, reached
// through cudaGetDriverEntryPoint rather than the dynamic linker).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>

#include "recorder/record_buffer.h"
#include "recorder/record_trace.h"
#include "traces/trace_io.h"

namespace {

using fraglab::record::CallKind;
using fraglab::record::RecordBuffer;
using Clock = std::chrono::steady_clock;

RecordBuffer& buffer() {
  static RecordBuffer* b = new RecordBuffer;  // never destroyed: calls may come during exit
  return *b;
}
const Clock::time_point start_time = Clock::now();

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_time).count(); }

uint64_t handle(const void* p) { return reinterpret_cast<uint64_t>(p); }

// The real function: the next definition after ours. When the runtime was loaded
// privately (dlopen with RTLD_LOCAL, as Python extensions can be), RTLD_NEXT cannot see
// it; then ask the already-loaded runtime by its soname.
void* real_symbol(const char* name) {
  if (void* fn = dlsym(RTLD_NEXT, name)) return fn;
  for (const char* soname : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
    if (void* lib = dlopen(soname, RTLD_NOLOAD | RTLD_LAZY))
      if (void* fn = dlsym(lib, name)) return fn;
  }
  std::fprintf(stderr, "fraglab_record: cannot find the real %s\n", name);
  std::abort();
}

template <typename Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(real_symbol(name));
}

void record_alloc(cudaError_t status, void** ptr, size_t size, cudaStream_t stream) {
  if (status == cudaSuccess)
    buffer().append(CallKind::Malloc, handle(*ptr), size, handle(stream), now_ns());
  else if (status == cudaErrorMemoryAllocation)
    buffer().append(CallKind::MallocFailed, 0, size, handle(stream), now_ns());
}

// Frees are recorded before the real call: once it returns, another thread may be handed
// the same address, and its record must come after this one.
void record_free(void* ptr, cudaStream_t stream) {
  if (ptr) buffer().append(CallKind::Free, handle(ptr), 0, handle(stream), now_ns());
}

std::string program_name() {
  std::ifstream in("/proc/self/cmdline");
  std::string cmd, arg;
  while (std::getline(in, arg, '\0')) cmd += (cmd.empty() ? "" : " ") + arg;
  return cmd;
}

void flush() {
  static std::once_flag once;
  std::call_once(once, [] {
    uint64_t count = buffer().close();
    const char* out = std::getenv("FRAGLAB_RECORD_OUT");
    std::string path = out && *out ? out : "fraglab_record." + std::to_string(getpid()) + ".jsonl";
    try {
      fraglab::Trace trace = fraglab::record::to_trace(buffer(), count, "fraglab_record: " + program_name());
      fraglab::save_trace(trace, path);
      std::fprintf(stderr, "fraglab_record: %zu events (%llu calls, %llu dropped, %llu unknown frees) -> %s\n",
                   trace.events.size(), static_cast<unsigned long long>(count),
                   static_cast<unsigned long long>(buffer().dropped()),
                   static_cast<unsigned long long>(trace.meta.dropped_unknown_frees), path.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fraglab_record: could not write %s: %s\n", path.c_str(), e.what());
    }
  });
}

// Flushed when the library is unloaded at normal exit (after the program's own atexit
// handlers have run, so frees made there are recorded too).
__attribute__((destructor)) void flush_at_exit() { flush(); }

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** ptr, size_t size) {
  static auto fn = real<cudaError_t (*)(void**, size_t)>("cudaMalloc");
  cudaError_t status = fn(ptr, size);
  record_alloc(status, ptr, size, nullptr);
  return status;
}

cudaError_t cudaFree(void* ptr) {
  static auto fn = real<cudaError_t (*)(void*)>("cudaFree");
  record_free(ptr, nullptr);
  return fn(ptr);
}

cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
  static auto fn = real<cudaError_t (*)(void**, size_t, cudaStream_t)>("cudaMallocAsync");
  cudaError_t status = fn(ptr, size, stream);
  record_alloc(status, ptr, size, stream);
  return status;
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  static auto fn = real<cudaError_t (*)(void*, cudaStream_t)>("cudaFreeAsync");
  record_free(ptr, stream);
  return fn(ptr, stream);
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  static auto fn = real<cudaError_t (*)(void**, size_t, cudaMemPool_t, cudaStream_t)>("cudaMallocFromPoolAsync");
  cudaError_t status = fn(ptr, size, pool, stream);
  record_alloc(status, ptr, size, stream);
  return status;
}

}  // extern "C"
