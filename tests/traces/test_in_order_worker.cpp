// InOrderWorker: batches processed in order on one worker thread, its error thrown by drain(), a small input
// processed by drain() on the caller's thread.
#include <catch2/catch.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "traces/formats/pytorch/pytorch_snapshot.h"
#include "traces/history_check.h"
#include "traces/in_order_worker.h"
#include "traces/trace_io.h"

using namespace fraglab;

namespace {
using Worker = InOrderWorker<int, std::function<void(const int*, size_t)>>;

// What a worker processed, in order, and on which thread it ran last.
struct Seen {
  std::vector<int> items;
  std::thread::id ran_on;
  Worker::Process recorder() {
    return [this](const int* batch, size_t n) {
      ran_on = std::this_thread::get_id();
      items.insert(items.end(), batch, batch + n);
    };
  }
};
}  // namespace

TEST_CASE("in-order worker: every item processed once in order on the worker", "[snapshot][threads]") {
  Seen seen;
  Worker w(seen.recorder(), 64);
  for (int i = 0; i < 10000; ++i) w.push(i);
  w.drain();
  REQUIRE(seen.items.size() == 10000);
  for (int i = 0; i < 10000; ++i) REQUIRE(seen.items[static_cast<size_t>(i)] == i);
  CHECK(seen.ran_on != std::this_thread::get_id());
  // It goes on after a drain.
  for (int i = 10000; i < 10100; ++i) w.push(i);
  w.drain();
  CHECK(seen.items.size() == 10100);
  CHECK(seen.items.back() == 10099);
}

TEST_CASE("in-order worker: a batch that never fills is processed by drain on the caller's thread",
          "[snapshot][threads]") {
  Seen seen;
  Worker w(seen.recorder(), 64);
  for (int i = 0; i < 10; ++i) w.push(i);
  w.drain();
  CHECK(seen.items.size() == 10);
  CHECK(seen.ran_on == std::this_thread::get_id());
}

TEST_CASE("in-order worker: the worker's first error is thrown by drain and later batches are dropped",
          "[snapshot][threads]") {
  std::vector<int> seen;
  Worker w(
      [&](const int* items, size_t n) {
        for (size_t i = 0; i < n; ++i) {
          if (items[i] == 300) throw std::runtime_error("bad item 300");
          seen.push_back(items[i]);
        }
      },
      64);
  for (int i = 0; i < 1000; ++i) w.push(i);
  CHECK_THROWS_WITH(w.drain(), "bad item 300");
  REQUIRE(seen.size() == 300);
  CHECK(seen.back() == 299);
}

TEST_CASE("in-order worker: stop drops what is pending and forgets the error", "[snapshot][threads]") {
  Worker w([](const int*, size_t) { throw std::runtime_error("never seen"); }, 8);
  for (int i = 0; i < 100; ++i) w.push(i);
  w.stop();
  CHECK_NOTHROW(w.stop());
}

TEST_CASE("in-order worker: a worker stopped takes new items afterwards", "[snapshot][threads]") {
  Seen seen;
  Worker w(seen.recorder(), 8);
  for (int i = 0; i < 100; ++i) w.push(i);
  w.stop();
  seen.items.clear();
  for (int i = 0; i < 100; ++i) w.push(i);
  w.drain();
  REQUIRE(seen.items.size() == 100);
  CHECK(seen.items.front() == 0);
  CHECK(seen.items.back() == 99);
}

// The snapshot importer's two workers (traces/formats/pytorch/pytorch_snapshot.cpp): the entries' fields read on
// one, the history checked on another as they resolve ids (from four cores), as `info` asks; the verdict the
// check leaves is what a walk of the built trace finds. Here, and under ThreadSanitizer, on any machine.
TEST_CASE("in-order worker: the snapshot import's history check on a thread of its own", "[snapshot][threads]") {
  struct Reset {
    ~Reset() { set_snapshot_import_cores(0); }
  } reset;
  for (unsigned cores : {2u, 16u}) {
    INFO(cores << " cores");
    set_snapshot_import_cores(cores);
    ReadOptions options;
    options.check_history_ahead = true;
    const Trace t =
        read_pytorch_snapshot(std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/gpt2_train.default.pickle.gz", options);
    CHECK(last_snapshot_import_resolved_ahead());
    CHECK(last_snapshot_import_checked_ahead());
    HistoryChecker walk(t.meta);
    walk.add(t.events.data(), t.events.size(), 0);
    CHECK(walk.result().count == 0);
    CHECK(check_history(t).count == 0);
  }
}
