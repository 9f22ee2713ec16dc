#include "traces/history_check.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <future>
#include <iterator>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <new>
#include <vector>

namespace fraglab {

namespace {

// Memory for nodes of one size, taken back onto a free list: the live blocks' map allocates and frees a node for
// each of millions of blocks. malloc's share of the check was a fifth, and the standard pool resource's
// deallocate (which searches for the chunk a pointer came from) still a tenth.
class NodeFreeList final : public std::pmr::memory_resource {
 private:
  struct Free {
    Free* next;
  };
  void* do_allocate(size_t bytes, size_t align) override {
    if (bytes != node_ || align > alignof(std::max_align_t)) {
      if (node_ == 0 && bytes >= sizeof(Free) && align <= alignof(std::max_align_t))
        node_ = bytes;  // the first request sets the size
      else
        return std::pmr::new_delete_resource()->allocate(bytes, align);
    }
    if (!free_) refill();
    Free* f = free_;
    free_ = f->next;
    return f;
  }
  void do_deallocate(void* p, size_t bytes, size_t align) override {
    if (bytes != node_ || align > alignof(std::max_align_t))
      return std::pmr::new_delete_resource()->deallocate(p, bytes, align);
    free_ = new (p) Free{free_};
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }
  void refill() {
    constexpr size_t kNodes = 1024;
    const size_t stride =
        (node_ + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);
    chunks_.push_back(std::make_unique<std::max_align_t[]>(stride * kNodes / sizeof(std::max_align_t)));
    auto* base = reinterpret_cast<std::byte*>(chunks_.back().get());
    for (size_t i = kNodes; i-- > 0;) free_ = new (base + i * stride) Free{free_};
  }

  size_t node_ = 0;
  Free* free_ = nullptr;
  std::vector<std::unique_ptr<std::max_align_t[]>> chunks_;
};

}  // namespace

class HistoryChecker::Impl {
 public:
  explicit Impl(const TraceMeta& meta) {
    knows_segments_ = !meta.initial.segments.empty();
    for (const RecordedSegment& s : meta.initial.segments)
      if (s.total_size) add_memory(s.address, s.total_size);
    if (meta.double_frees)
      problem(0, fmt::format("{} double free{} (a block freed again with no allocation between; dropped)",
                             meta.double_frees, meta.double_frees == 1 ? "" : "s"));
  }

  void add(const Event& e, uint64_t i) {
    {
      switch (e.kind) {
        case EventKind::SegmentAlloc:
        case EventKind::SegmentMap:
          knows_segments_ = true;  // from here on, blocks are checked against the recorded memory
          add_memory(e.addr, e.size);
          break;
        case EventKind::SegmentFree:
        case EventKind::SegmentUnmap:
          remove_memory(e.addr, e.size);
          break;
        case EventKind::Alloc:
          on_alloc(e, i);
          break;
        case EventKind::Free:
          on_free(e);
          break;
        default:
          break;
      }
    }
  }
  const HistoryProblems& result() const { return out_; }

 private:
  struct Live {
    uint64_t size;
    AllocId id;
    uint64_t event;
  };
  // The live blocks' nodes come from a free list of their own (NodeFreeList).
  using LiveBlocks = std::pmr::map<Addr, Live>;
  // By id: the live allocation's requested bytes, and its block where it is tracked (an erase without a search).
  struct ById {
    uint64_t size = 0;
    LiveBlocks::iterator block{};
    bool tracked = false;
  };
  bool knows_segments_ = false;
  std::map<Addr, uint64_t> memory_;  // recorded memory, touching ranges merged
  uint64_t reserved_ = 0, live_bytes_ = 0;
  bool over_reserved_ = false;  // reported once per excursion, not at every event of it
  NodeFreeList nodes_;
  LiveBlocks live_{&nodes_};
  std::vector<ById> by_id_;
  HistoryProblems out_;

  void problem(uint64_t event, const std::string& what) {
    if (out_.count++ == 0) {
      out_.first_event = event;
      out_.first = what;
    }
  }

  void add_memory(Addr addr, uint64_t size) {
    reserved_ += size;
    Addr end = addr + size;
    auto next = memory_.lower_bound(addr);
    if (next != memory_.end() && next->first <= end) {
      end = std::max(end, next->first + next->second);
      next = memory_.erase(next);
    }
    if (next != memory_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second >= addr) {
        prev->second = std::max(prev->first + prev->second, end) - prev->first;
        return;
      }
    }
    memory_.emplace(addr, end - addr);
  }

  void remove_memory(Addr addr, uint64_t size) {
    reserved_ -= std::min(reserved_, size);
    auto it = memory_.upper_bound(addr);
    if (it == memory_.begin()) return;
    --it;
    const Addr start = it->first, stop = it->first + it->second, end = addr + size;
    if (addr >= stop) return;
    memory_.erase(it);
    if (start < addr) memory_.emplace(start, addr - start);
    if (end < stop) memory_.emplace(end, stop - end);
  }

  bool in_memory(Addr addr, uint64_t size) const {
    auto it = memory_.upper_bound(addr);
    if (it == memory_.begin()) return false;
    --it;
    return addr + size <= it->first + it->second;
  }

  void on_alloc(const Event& e, uint64_t index) {
    live_bytes_ += e.size;
    if (knows_segments_ && live_bytes_ > reserved_) {
      if (!over_reserved_)
        problem(index, fmt::format("{} bytes live beside {} bytes of recorded segments (allocation id {})", live_bytes_,
                                   reserved_, e.id));
      over_reserved_ = true;
    }
    if (e.id >= by_id_.size()) by_id_.resize(e.id + 1);
    ById& mine = by_id_[e.id];
    mine = {e.size, {}, false};
    if (e.addr == 0 || e.size == 0) return;
    auto next = live_.lower_bound(e.addr);
    const Live* over = nullptr;
    Addr over_at = 0;
    if (next != live_.end() && next->first < e.addr + e.size) over = &next->second, over_at = next->first;
    if (!over && next != live_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.size > e.addr) over = &prev->second, over_at = prev->first;
    }
    if (over) {
      problem(index, fmt::format("allocation id {} at 0x{:x} ({} bytes) overlaps the block at 0x{:x} live since "
                                 "event {} (id {})",
                                 e.id, e.addr, e.size, over_at, over->event, over->id));
      return;  // not tracked: the live block keeps its place
    }
    if (knows_segments_ && !in_memory(e.addr, e.size))
      problem(index,
              fmt::format("allocation id {} at 0x{:x} ({} bytes) lies in no recorded segment", e.id, e.addr, e.size));
    mine.block = live_.emplace_hint(next, e.addr, Live{e.size, e.id, index});
    mine.tracked = true;
  }

  void on_free(const Event& e) {
    if (e.id >= by_id_.size()) return;
    ById& mine = by_id_[e.id];
    if (mine.tracked) live_.erase(mine.block);
    live_bytes_ -= std::min(live_bytes_, mine.size);
    mine = {};
    if (live_bytes_ <= reserved_) over_reserved_ = false;
  }
};

HistoryChecker::HistoryChecker(const TraceMeta& meta) : impl_(std::make_unique<Impl>(meta)) {}
HistoryChecker::~HistoryChecker() = default;
void HistoryChecker::add(const Event* events, size_t n, uint64_t first_index) {
  for (size_t i = 0; i < n; ++i) impl_->add(events[i], first_index + i);
}
const HistoryProblems& HistoryChecker::result() const { return impl_->result(); }

namespace {

// What the check reads of a trace, hashed to 128 bits: the initial segments, the importer's double frees and,
// in order, the kind, id, address and size of every event the checker looks at (segments, allocations,
// frees). Events it skips (empty_cache, pool releases, free requests, OOMs) and pools are left out, so the
// variants of one snapshot that the model's check of the pools replays (the same history, other pools,
// inserted releases) share one fingerprint.
struct Fingerprint {
  uint64_t a = 0x243F6A8885A308D3ull, b = 0x13198A2E03707344ull;
  void add(uint64_t x, uint64_t y) {
    a = std::rotl((a ^ x) * 0x9E3779B97F4A7C15ull, 27) ^ y;
    b = std::rotl((b + y) * 0xC2B2AE3D27D4EB4Full, 31) ^ x;
  }
  bool operator==(const Fingerprint&) const = default;
};

bool checked_kind(EventKind k) {
  switch (k) {
    case EventKind::SegmentAlloc:
    case EventKind::SegmentMap:
    case EventKind::SegmentFree:
    case EventKind::SegmentUnmap:
    case EventKind::Alloc:
    case EventKind::Free:
      return true;
    default:
      return false;
  }
}

// The events' part, hashed as they come (HistoryCheckAhead hashes them before the trace's meta is known).
class EventsPrint {
 public:
  void add(const Event& e) {
    if (!checked_kind(e.kind)) return;
    f_.add(e.addr, e.size ^ (uint64_t{e.id} << 8 | static_cast<uint64_t>(e.kind)) * 0xFF51AFD7ED558CCDull);
    ++checked_;
  }
  // The whole fingerprint, with the meta's part.
  Fingerprint with(const TraceMeta& meta) const {
    Fingerprint f;
    for (const RecordedSegment& s : meta.initial.segments) f.add(s.address, s.total_size);
    f.add(meta.initial.segments.size(), meta.double_frees);
    f.add(f_.a, f_.b);
    f.add(checked_, 0);
    return f;
  }

 private:
  Fingerprint f_;
  uint64_t checked_ = 0;
};

Fingerprint fingerprint(const Trace& trace) {
  EventsPrint print;
  for (const Event& e : trace.events) print.add(e);
  return print.with(trace.meta);
}

// The last histories found clean. The pools' model check replays `fidelity` on hundreds of variants of one
// snapshot (871 on a 187k-event recording with garbage collection under a memory fraction), and checking
// each variant's history again took half of that time (10.8 ms a pass): a variant whose fingerprint is that of
// a clean history is clean. Only clean verdicts are kept: a problem's event index depends on the events the
// fingerprint leaves out, and a history with problems is checked every time.
class CleanHistories {
 public:
  bool contains(const Fingerprint& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::find(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(size_), f) !=
           kept_.begin() + static_cast<std::ptrdiff_t>(size_);
  }
  void add(const Fingerprint& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    kept_[next_] = f;
    next_ = (next_ + 1) % kept_.size();
    size_ = std::min(size_ + 1, kept_.size());
  }

 private:
  std::mutex mutex_;
  std::array<Fingerprint, 16> kept_{};
  size_t next_ = 0, size_ = 0;
};

CleanHistories& clean_histories() {
  static CleanHistories histories;
  return histories;
}

}  // namespace

class HistoryCheckAhead::Impl {
 public:
  void add(const Event& e) {
    checker_.add(&e, 1, next_++);
    print_.add(e);
  }
  bool remember(const TraceMeta& meta) {
    // The check began with nothing before the history: its verdict is the trace's only where the trace has
    // nothing there either (the checker reads the initial segments and the double frees of the meta).
    if (checker_.result().count != 0 || !meta.initial.segments.empty() || meta.double_frees != 0) return false;
    clean_histories().add(print_.with(meta));
    return true;
  }

 private:
  HistoryChecker checker_{TraceMeta{}};
  EventsPrint print_;
  uint64_t next_ = 0;
};

HistoryCheckAhead::HistoryCheckAhead() : impl_(std::make_unique<Impl>()) {}
HistoryCheckAhead::~HistoryCheckAhead() = default;
void HistoryCheckAhead::add(const Event& e) { impl_->add(e); }
bool HistoryCheckAhead::remember(const TraceMeta& meta) { return impl_->remember(meta); }

HistoryProblems check_history(const Trace& trace) {
  const Fingerprint f = fingerprint(trace);
  if (clean_histories().contains(f)) return {};
  HistoryChecker checker(trace.meta);
  checker.add(trace.events.data(), trace.events.size(), 0);
  if (checker.result().count == 0) clean_histories().add(f);
  return checker.result();
}

CheckedStats compute_checked_stats(EventSource& source) {
  HistoryChecker checker(source.meta());
  CheckedStats c;
  c.stats = compute_stats(source, [&](const Event* e, size_t n, uint64_t first) { checker.add(e, n, first); });
  c.history = checker.result();
  return c;
}

// The events are all in memory: the check walks them on a second thread while the statistics do on
// this one (on a 2.4M-entry snapshot each pass is ~0.15 s of `info`'s critical path).
CheckedStats compute_checked_stats(const Trace& whole) {
  std::future<HistoryProblems> history = std::async(std::launch::async, [&whole] { return check_history(whole); });
  MemorySource source(whole);
  CheckedStats c;
  c.stats = compute_stats(source);
  c.history = history.get();
  return c;
}

}  // namespace fraglab
