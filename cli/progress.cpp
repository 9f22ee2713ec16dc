#include "cli/progress.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace fraglab::cli {

namespace {

std::chrono::milliseconds delay() {
  if (const char* text = std::getenv("FRAGLAB_PROGRESS_AFTER_MS"); text && *text) {
    char* end = nullptr;
    const long ms = std::strtol(text, &end, 10);
    if (end && *end == '\0' && ms >= 0) return std::chrono::milliseconds(ms);
  }
  return std::chrono::milliseconds(1000);
}

}  // namespace

Progress::Progress(std::string what) : what_(std::move(what)), start_(std::chrono::steady_clock::now()) {
  if (::isatty(STDERR_FILENO)) thread_ = std::thread([this] { draw_loop(); });
}

Progress::~Progress() { done(); }

void Progress::stage(std::string what) {
  {
    std::lock_guard lock(mutex_);
    what_ = std::move(what);
    changed_ = true;
  }
  wake_.notify_all();  // shown now, not at the next redraw
}

void Progress::done() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Progress::draw_loop() {
  std::unique_lock lock(mutex_);
  if (wake_.wait_until(lock, start_ + delay(), [this] { return stop_; })) return;
  for (;;) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    fmt::print(stderr, "\r\033[Kfraglab {} ({:.0f} s)", what_, seconds);
    std::fflush(stderr);
    changed_ = false;
    if (wake_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_ || changed_; }) && stop_) break;
  }
  fmt::print(stderr, "\r\033[K");  // the line erased: the answer starts on a clean line
  std::fflush(stderr);
}

}  // namespace fraglab::cli
