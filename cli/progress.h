// What a long command is doing, as one line on standard error redrawn in place ("fraglab tune: replaying
// settings, 12 s"): only where standard error is a terminal, never in a pipe, a file or a log, and only once
// the command has run for a second (FRAGLAB_PROGRESS_AFTER_MS sets another delay, for tests). The line is
// erased before the command prints its answer. compare has its own bar (jobs done of all).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace fraglab::cli {

class Progress {
 public:
  // `what`: the command and what it does ("tune: replaying settings").
  explicit Progress(std::string what);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Says what the command does now.
  void stage(std::string what);
  // Erases the line and stops: call before printing the answer.
  void done();

 private:
  void draw_loop();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string what_;
  bool stop_ = false, changed_ = false;
  std::chrono::steady_clock::time_point start_;
  std::thread thread_;
};

}  // namespace fraglab::cli
