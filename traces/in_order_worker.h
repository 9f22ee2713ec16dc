// InOrderWorker<Item>: items handed to one worker thread in batches and processed there in the order they
// were pushed, while the pusher goes on. For the second stage of a two-stage reading: the snapshot parser
// finds each trace entry's values and the importer turns them into events on the other core (that turning
// is a quarter of the parse's time; the core is idle once inflating is done).
//
// The worker's first exception stops it (later batches are dropped) and is thrown by drain() in the pushing
// thread, where a one-thread reading would have thrown it. A batch that never fills (a small input) is
// processed by drain() itself on the calling thread: no thread is started for it. Where no thread can be
// started, every batch is processed on the pusher's.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace fraglab {

template <class Item, class ProcessBatch>
class InOrderWorker {
 public:
  using Process = ProcessBatch;
  // `process(const Item*, size_t)` runs on the worker, one batch at a time, in order.
  explicit InOrderWorker(ProcessBatch process, size_t batch = 2048) : process_(std::move(process)), batch_(batch) {
    filling_.reserve(batch_);
  }
  ~InOrderWorker() { stop(); }
  InOrderWorker(const InOrderWorker&) = delete;
  InOrderWorker& operator=(const InOrderWorker&) = delete;

  void push(const Item& item) {
    filling_.push_back(item);
    if (filling_.size() >= batch_) hand_over();
  }

  // Every item pushed is processed; throws the worker's exception, if any (once).
  void drain() {
    if (!thread_.joinable()) {  // nothing handed over: the caller processes the rest itself
      run_here();
      return;
    }
    if (!filling_.empty()) hand_over();
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  // Ends the worker, dropping what it has not processed, and forgets its error: for a reading abandoned by
  // an error of its own.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      queue_.clear();
    }
    work_.notify_one();
    if (thread_.joinable()) thread_.join();
    filling_.clear();
    error_ = nullptr;
    stopping_ = false;  // the thread is gone: a later push starts another
  }

 private:
  // Batches queued at most: the pusher waits beyond that (memory stays bounded when the worker is slower).
  static constexpr size_t kMaxQueued = 8;

  void hand_over() {
    if (!thread_.joinable() && !start()) {
      run_here();
      return;
    }
    std::vector<Item> next = take_spare();
    {
      std::unique_lock<std::mutex> lock(mutex_);
      room_.wait(lock, [this] { return queue_.size() < kMaxQueued; });
      queue_.push_back(std::move(filling_));
    }
    work_.notify_one();
    filling_ = std::move(next);
  }

  void run_here() {
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    std::vector<Item> batch = std::move(filling_);
    filling_ = {};
    process_(batch.data(), batch.size());
  }

  bool start() {
    try {
      thread_ = std::thread([this] { loop(); });
      return true;
    } catch (const std::system_error&) {
      return false;
    }
  }

  std::vector<Item> take_spare() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Item> v;
    if (!spare_.empty()) {
      v = std::move(spare_.back());
      spare_.pop_back();
    }
    v.clear();
    v.reserve(batch_);
    return v;
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      std::vector<Item> batch = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      const bool failed = error_ != nullptr;
      lock.unlock();
      room_.notify_one();
      std::exception_ptr error;
      if (!failed) {
        try {
          process_(batch.data(), batch.size());
        } catch (...) {
          error = std::current_exception();
        }
      }
      lock.lock();
      if (error) error_ = error;
      batch.clear();
      spare_.push_back(std::move(batch));
      busy_ = false;
      idle_.notify_all();
    }
  }

  ProcessBatch process_;
  const size_t batch_;
  std::vector<Item> filling_;  // the pusher's
  std::thread thread_;
  std::mutex mutex_;  // guards what follows
  std::condition_variable work_, room_, idle_;
  std::deque<std::vector<Item>> queue_;
  std::vector<std::vector<Item>> spare_;
  std::exception_ptr error_;
  bool busy_ = false, stopping_ = false;
};

}  // namespace fraglab
