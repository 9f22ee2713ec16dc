#include "sim/replay.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace fraglab {

namespace {
[[noreturn]] void invariant_broken(uint64_t index, const std::string& what) {
  throw std::logic_error("invariant broken at event " + std::to_string(index) + ": " + what);
}
}  // namespace

ReplayEngine::ReplayEngine(Policy& policy, TrackingDevice& device, ReplayOptions options)
    : policy_(policy), device_(device), options_(std::move(options)) {
  observed_ = options_.check_invariants || options_.sample_every != 0 || static_cast<bool>(options_.on_event);
}

void ReplayEngine::establish_initial_state(const InitialState& initial) {
  if (established_) return;
  established_ = true;
  if (initial.live_blocks == 0 && initial.segments.empty()) return;
  uint64_t reserved_before = device_.reserved_bytes();
  if (auto blocks = policy_.adopt_initial_state(initial)) adopted_ = std::move(*blocks);
  if (device_.reserved_bytes() > reserved_before && device_.reserved_bytes() > result_.reserved.bytes) {
    result_.reserved = {device_.reserved_bytes(), 0};
    remember_peak(0);
  }
}

// A new peak of reserved bytes: remembered, with the state that makes it (remember_peak, out of line).
[[gnu::always_inline]] inline void ReplayEngine::note_reserved(uint64_t reserved, uint64_t index) {
  if (reserved > result_.reserved.bytes) [[unlikely]] {
    result_.reserved = {reserved, index};
    remember_peak(index);
  }
}

// The per-event path. It and the functions it calls are inlined into run()'s loop (always_inline:
// GCC kept them apart, and their register saves cost a fifth of the engine's time); what is rare
// (failures, observers, peaks) is out of line. An allocation or a free with no deferred peak and
// nothing observing (nearly every event of a trace) takes the short path: one test for the three.
static_assert(static_cast<int>(EventKind::Alloc) == 0 && static_cast<int>(EventKind::Free) == 1,
              "step()'s short path takes the kinds up to Free: every other kind is greater");
// (A deferred peak needs no other path: the journal is written where the live blocks change.)
[[gnu::always_inline]] inline bool ReplayEngine::step(const Event& e, uint64_t index) {
  if (observed_ || e.kind > EventKind::Free) [[unlikely]]
    return step_in_full(e, index);
  ++result_.events;
  event_index_ = index;
  if (e.kind == EventKind::Alloc) {
    if (!on_alloc(e, index)) return false;
  } else {
    on_free(e);
  }
  note_reserved(device_.reserved_bytes(), index);
  return true;
}

// Any event: recorded OOMs, reference events, and replay events around a deferred peak or watched.
bool ReplayEngine::step_in_full(const Event& e, uint64_t index) {
  if (e.kind == EventKind::Oom && options_.recorded_ooms) {
    on_recorded_oom(e, index);
    return true;
  }
  if (!is_replay_event(e.kind)) return true;  // reference events are the recorder's, not ours
  return apply_replay_event(e, index);
}

bool ReplayEngine::apply(const Event& e, uint64_t index) { return step_in_full(e, index); }

void ReplayEngine::settle_peak() {
  if (peak_.physical_deferred) {
    peak_.physical = device_.physical_at_mark();
    peak_.physical_deferred = false;
  }
  if (peak_.deferred) build_peak_blocks();
}

bool ReplayEngine::apply_replay_event(const Event& e, uint64_t index) {
  ++result_.events;
  const uint64_t reserved_before = device_.reserved_bytes();
  event_index_ = index;
  if (e.kind == EventKind::Alloc) {
    if (!on_alloc(e, index)) return false;
  } else if (e.kind == EventKind::Free) {
    on_free(e);
  } else if (e.kind == EventKind::EmptyCache) {
    ++result_.empty_caches;
    policy_.empty_cache();
  } else if (e.kind == EventKind::PoolRelease) {
    policy_.release_pool(e.pool);
  }
  after_event(e, index, reserved_before);
  return true;
}

void ReplayEngine::grow_ids(AllocId id) {
  blocks_.resize(id + 1);
  id_state_.resize(id + 1);
}

[[gnu::always_inline]] inline bool ReplayEngine::on_alloc(const Event& e, uint64_t index) {
  // Bounds by id_state_, which grows with blocks_: its size is a shift, blocks_' (48-byte records) a
  // multiply.
  if (e.id >= id_state_.size()) [[unlikely]]
    grow_ids(e.id);
  if (blocks_[e.id].live) invariant_broken(index, "alloc of id " + std::to_string(e.id) + " which is live");
  ++result_.allocs;
  trace_live_ += e.size;
  result_.live_bytes_bound = std::max(result_.live_bytes_bound, trace_live_);
  // The prologue of a mid-run history: blocks the policy adopted where the recording had them.
  std::optional<Block> block =
      index < adopted_.size() ? adopted_[index] : policy_.allocate(AllocRequest{e.id, e.size, e.stream, index, e.pool});
  if (!block) [[unlikely]]
    return on_alloc_failed(e, index);
  IdState& state = id_state_[e.id];
  state.skipped = false;
  state.live_pos = static_cast<uint32_t>(live_ids_.size());
  BlockRecord& b = blocks_[e.id];
  b = BlockRecord{block->addr, block->size, e.size, block->handle, index, e.stream, true};
  requested_ += e.size;
  allocated_ += block->size;
  // Only an allocation raises them (a recorded OOM's block is given back at once and counted there).
  if (requested_ > result_.requested.bytes) result_.requested = {requested_, index};
  if (allocated_ > result_.allocated.bytes) result_.allocated = {allocated_, index};
  live_ids_.push_back(e.id);
  live_blocks_.emplace_back(b.addr, b.size);
  journal_block(b.addr, b.size, +1);
  check_new_block(b, e, index);
  return true;
}

bool ReplayEngine::on_alloc_failed(const Event& e, uint64_t index) {
  result_.ooms.push_back({index, e.size, e.stream, device_.reserved_bytes(), allocated_});
  id_state_[e.id].skipped = true;
  blocks_[e.id].requested = e.size;  // not live; remembered so its free leaves the trace's live bytes
  if (options_.on_oom == OnOom::Stop) {
    result_.stopped_on_oom = true;
    return false;
  }
  return true;
}

void ReplayEngine::on_recorded_oom(const Event& e, uint64_t index) {
  const uint64_t reserved_before = device_.reserved_bytes();
  event_index_ = index;
  auto block = policy_.allocate(AllocRequest{kTransientRequest, e.size, e.stream, index, e.pool});
  const uint64_t reserved = device_.reserved_bytes();
  result_.recorded_ooms.push_back(
      {index, e.size, e.stream, block.has_value(), reserved, allocated_ + (block ? block->size : 0)});
  if (block) {
    if (allocated_ + block->size > result_.allocated.bytes) result_.allocated = {allocated_ + block->size, index};
    policy_.deallocate(*block);
  } else {
    result_.ooms.push_back({index, e.size, e.stream, reserved, allocated_, true});
  }
  after_event(e, index, reserved_before);
}

void ReplayEngine::on_free_not_live(const Event& e) {
  if (e.id < id_state_.size() && id_state_[e.id].skipped) {  // its alloc failed and was skipped
    id_state_[e.id].skipped = false;
    trace_live_ -= blocks_[e.id].requested;
    return;
  }
  throw std::logic_error("free of id " + std::to_string(e.id) + " which is not live");
}

[[gnu::always_inline]] inline void ReplayEngine::on_free(const Event& e) {
  if (e.id >= id_state_.size() || !blocks_[e.id].live) [[unlikely]]
    return on_free_not_live(e);
  BlockRecord& b = blocks_[e.id];
  b.live = false;
  const uint32_t pos = id_state_[e.id].live_pos;  // swap-remove from the live list
  const AllocId last = live_ids_.back();
  live_ids_[pos] = last;
  live_blocks_[pos] = live_blocks_.back();
  id_state_[last].live_pos = pos;
  live_ids_.pop_back();
  live_blocks_.pop_back();
  trace_live_ -= b.requested;
  requested_ -= b.requested;
  allocated_ -= b.size;
  ++result_.frees;
  if (b.size) [[likely]]
    by_address_.erase(b.addr);
  journal_block(b.addr, b.size, -1);
  policy_.deallocate(Block{b.addr, b.size, b.handle});
}

void ReplayEngine::after_event(const Event& e, uint64_t index, uint64_t reserved_before) {
  const uint64_t reserved = device_.reserved_bytes();
  note_reserved(reserved, index);
  if (observed_) [[unlikely]]
    observe(e, index, reserved, reserved_before);
}

void ReplayEngine::observe(const Event& e, uint64_t index, uint64_t reserved, uint64_t reserved_before) {
  if (options_.check_invariants && reserved < reserved_before) check_all_backed(index);
  if (options_.sample_every && index % options_.sample_every == 0) result_.samples.push_back(measure(index));
  if (options_.on_event) options_.on_event({index, e.time_us, requested_, allocated_, reserved});
}

// What every block must be, checked for every policy on every allocation: a binary search in the
// live blocks and one in the device's memory, next to the policy's own work.
[[gnu::always_inline]] inline void ReplayEngine::check_new_block(const BlockRecord& b, const Event& e, uint64_t index) {
  if (b.size < e.size) [[unlikely]]
    misbehaved(b, e, index, b.size == 0 ? "an empty block" : "a block smaller than the request");
  if (b.size == 0) [[unlikely]]
    return;  // a 0-byte request's empty block occupies nothing (and is not indexed)
  if (!device_.is_backed(b.addr, b.size)) [[unlikely]]
    misbehaved(b, e, index, "a block outside the device memory it holds (never allocated, or freed)");
  auto next = by_address_.lower_bound(b.addr);
  if (next != by_address_.end() && next->first < b.addr + b.size) [[unlikely]]
    misbehaved(b, e, index, "a block over live allocation id " + std::to_string(next->second.second));
  if (next != by_address_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.first > b.addr) [[unlikely]]
      misbehaved(b, e, index, "a block over live allocation id " + std::to_string(prev->second.second));
  }
  by_address_.emplace_hint(next, b.addr, std::make_pair(b.size, e.id));
}

void ReplayEngine::misbehaved(const BlockRecord& b, const Event& e, uint64_t index, const std::string& what) const {
  char where[64];
  std::snprintf(where, sizeof where, "0x%llx", static_cast<unsigned long long>(b.addr));
  throw PolicyMisbehaved(policy_name_ + " misbehaved at event " + std::to_string(index) + " (allocation id " +
                         std::to_string(e.id) + ", " + std::to_string(e.size) + " bytes): it returned " + what + ": " +
                         std::to_string(b.size) + " bytes at " + where);
}

void ReplayEngine::check_all_backed(uint64_t index) const {
  for (const auto& [addr, entry] : by_address_)
    if (!device_.is_backed(addr, entry.first))
      invariant_broken(index, "live id " + std::to_string(entry.second) + " lost its device memory");
}

void ReplayEngine::remember_peak(uint64_t index) {
  peak_.pending = true;
  peak_.event_index = index;
  peak_.requested = requested_;
  peak_.allocated = allocated_;
  if (device_.aliases().empty()) {
    peak_.deferred = peak_.physical_deferred = true;
    peak_.journal.clear();
    device_.mark_physical();
    return;
  }
  // Stitched ranges (gmlake): a block in an alias mapping occupies the physical pages it shows, which
  // later aliasing changes: taken now.
  peak_.deferred = peak_.physical_deferred = false;
  device_.physical().copy_to(peak_.physical);
  peak_.allocated = 0;
  peak_.blocks.clear();
  for (const auto& [addr, size] : live_blocks_)
    device_.for_each_physical_piece(addr, size, [&](Addr piece, uint64_t piece_size) {
      peak_.blocks.emplace_back(piece, piece_size);
      peak_.allocated += piece_size;
    });
}

void ReplayEngine::journal_block_slow(Addr addr, uint64_t size, int delta) {
  peak_.journal.push_back({addr, size, delta});
  if (peak_.journal.size() > live_blocks_.size() + 64) build_peak_blocks();
}

// The deferred peak's blocks: the live blocks now, less those added since, with those removed since.
// The device's ranges at the peak stay journaled there until settle_peak() asks.
void ReplayEngine::build_peak_blocks() {
  using Change = PeakState::Change;
  auto by_block = [](const Change& a, const Change& b) { return std::tie(a.addr, a.size) < std::tie(b.addr, b.size); };
  std::sort(peak_.journal.begin(), peak_.journal.end(), by_block);
  // Net change per block (a block freed and allocated again at one address since the peak nets 0).
  std::vector<Change> net;
  for (const Change& c : peak_.journal) {
    if (!net.empty() && net.back().addr == c.addr && net.back().size == c.size)
      net.back().delta += c.delta;
    else
      net.push_back(c);
  }
  peak_.blocks.clear();
  peak_.blocks.reserve(live_blocks_.size() + net.size());
  for (const auto& block : live_blocks_) {
    Change key{block.first, block.second, 0};
    auto it = std::lower_bound(net.begin(), net.end(), key, by_block);
    if (it != net.end() && it->addr == block.first && it->size == block.second && it->delta > 0) {
      --it->delta;  // added since the peak
      continue;
    }
    peak_.blocks.push_back(block);
  }
  for (const Change& c : net)
    for (int k = 0; k < -c.delta; ++k) peak_.blocks.emplace_back(c.addr, c.size);  // removed since the peak
  peak_.journal.clear();
  peak_.journal.shrink_to_fit();
  peak_.deferred = false;  // the device may still journal its ranges: settle_peak() takes them
}

Fragmentation ReplayEngine::measure(uint64_t event_index) const {
  if (device_.aliases().empty()) {
    scratch_.assign(live_blocks_.begin(), live_blocks_.end());
    return measure_fragmentation_unsorted(device_.physical(), scratch_, allocated_, requested_, event_index);
  }
  // A block in an alias mapping (a stitched range) occupies the physical pages it shows.
  std::vector<BlockRecord> pieces;
  pieces.reserve(blocks_.size());
  for (const auto& b : blocks_) {
    if (!b.live) continue;
    bool first = true;
    device_.for_each_physical_piece(b.addr, b.size, [&](Addr addr, uint64_t size) {
      BlockRecord piece = b;
      piece.addr = addr;
      piece.size = size;
      piece.requested = first ? b.requested : 0;
      first = false;
      pieces.push_back(piece);
    });
  }
  return measure_fragmentation(device_.physical(), pieces, event_index);
}

void ReplayEngine::run(EventSource& source) {
  constexpr size_t kChunk = 1 << 16;
  std::vector<Event> buffer;
  uint64_t index = 0;
  auto start = std::chrono::steady_clock::now();
  establish_initial_state(source.meta().initial);
  while (index < options_.stop_before) {
    // A trace in memory is replayed where it lies: copying it chunk by chunk cost about a
    // tenth of a fast policy's replay time.
    size_t n = 0;
    const Event* chunk = source.read_in_place(kChunk, n);
    if (!chunk) {
      buffer.resize(kChunk);
      n = source.read(buffer.data(), buffer.size());
      chunk = buffer.data();
    }
    if (n == 0) break;
    n = static_cast<size_t>(std::min<uint64_t>(n, options_.stop_before - index));
    for (size_t i = 0; i < n; ++i, ++index) {
      if (!step(chunk[i], index)) {
        index = options_.stop_before;  // stop after this chunk
        break;
      }
    }
    if (options_.progress && !options_.progress(index)) {
      result_.cancelled = true;
      break;
    }
  }
  result_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ReplayResult ReplayEngine::take_result() {
  settle_peak();  // nothing changed the state since the peak
  if (peak_.pending) {
    result_.at_peak = measure_fragmentation_unsorted(peak_.physical, peak_.blocks, peak_.allocated, peak_.requested,
                                                     peak_.event_index);
    peak_.pending = false;
  }
  result_.final_reserved = device_.reserved_bytes();
  result_.final_allocated = allocated_;
  result_.final_requested = requested_;
  result_.calls = device_.counts();
  return std::move(result_);
}

}  // namespace fraglab
