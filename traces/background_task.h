// BackgroundTask: work run on a thread of its own, joined by join() or when the object goes; where no
// thread can be started, the work runs right away on the caller's. For work the other core can take while
// this one goes on, whose end nobody waits for but the owner: giving memory back, faulting pages in,
// reading a file for a parser that waits on its own progress counter.
#pragma once

#include <memory>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

namespace fraglab {

class BackgroundTask {
 public:
  BackgroundTask() = default;
  template <class F>
  explicit BackgroundTask(F&& work) {
    start(std::forward<F>(work));
  }
  ~BackgroundTask() { join(); }
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  // Joins any earlier work first. The work is held where the thread's failure to start leaves it callable.
  template <class F>
  void start(F&& work) {
    join();
    auto held = std::make_shared<std::decay_t<F>>(std::forward<F>(work));
    try {
      thread_ = std::thread([held] { (*held)(); });
    } catch (const std::system_error&) {
      (*held)();
    }
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
};

}  // namespace fraglab
