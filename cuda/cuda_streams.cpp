#include "cuda/cuda_streams.h"

#include "cuda/cuda_error.h"

namespace fraglab::cuda {

StreamSet::StreamSet(size_t count) {
  streams_.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    cudaStream_t s = nullptr;
    FRAGLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    streams_.push_back(s);
  }
}

StreamSet::~StreamSet() {
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
}

void StreamSet::synchronize() const {
  for (cudaStream_t s : streams_) FRAGLAB_CUDA_CHECK(cudaStreamSynchronize(s));
}

void warm_up(const StreamSet& streams) {
  void* scratch = nullptr;
  FRAGLAB_CUDA_CHECK(cudaMalloc(&scratch, 2u << 20));
  for (size_t i = 0; i < streams.size(); ++i)
    FRAGLAB_CUDA_CHECK(cudaMemsetAsync(scratch, 0, 2u << 20, streams[static_cast<StreamIndex>(i)]));
  streams.synchronize();
  FRAGLAB_CUDA_CHECK(cudaFree(scratch));
  FRAGLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace fraglab::cuda
