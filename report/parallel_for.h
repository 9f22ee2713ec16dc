// fn(i) for every i in [0, n) on up to `threads` threads, the caller's among them: the worker pool that tune's
// search and fit's batch search share. Every index runs even after one throws; the first exception (in time) is
// rethrown once all have stopped.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fraglab {

template <class Fn>
void parallel_for(size_t n, unsigned threads, Fn&& fn) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned k = 1; k < std::min<size_t>(threads, n); ++k) pool.emplace_back(worker);
    worker();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace fraglab
