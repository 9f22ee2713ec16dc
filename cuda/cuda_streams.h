// One real CUDA stream per stream of the trace, so that stream-ordered work (touching
// blocks, cudaMallocAsync's pools) happens on as many streams as the program used.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "traces/trace.h"

namespace fraglab::cuda {

class StreamSet {
 public:
  explicit StreamSet(size_t count);  // throws CudaError
  ~StreamSet();
  StreamSet(const StreamSet&) = delete;
  StreamSet& operator=(const StreamSet&) = delete;

  cudaStream_t operator[](StreamIndex i) const { return streams_.at(i); }
  size_t size() const { return streams_.size(); }
  void synchronize() const;

 private:
  std::vector<cudaStream_t> streams_;
};

// Makes the CUDA runtime load what it loads lazily (the memset path, the stream's
// resources) before free memory is first read, so that it is not counted as the replay's.
void warm_up(const StreamSet& streams);

}  // namespace fraglab::cuda
