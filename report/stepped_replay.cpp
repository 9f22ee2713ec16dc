#include "report/stepped_replay.h"

#include "sim/replay_simulated.h"

namespace fraglab {

std::optional<Addr> StreamRecordingDevice::do_allocate_segment(uint64_t size, StreamIndex stream) {
  auto addr = upstream().allocate_segment(size, stream);
  if (addr) pieces_[*addr] = {size, stream, pool_};
  return addr;
}

void StreamRecordingDevice::do_free_segment(Addr addr, uint64_t size) {
  pieces_.erase(addr);
  upstream().free_segment(addr, size);
}

bool StreamRecordingDevice::do_map_pages(Addr addr, uint64_t size, StreamIndex stream) {
  if (!upstream().map_pages(addr, size, stream)) return false;
  pieces_[addr] = {size, stream, pool_};
  return true;
}

void StreamRecordingDevice::do_unmap_pages(Addr addr, uint64_t size) {
  // Unmapping may cut mapped runs anywhere: a run straddling the start keeps its part before
  // the range, and any run's part past the range's end stays as a run of its own.
  const Addr end = addr + size;
  auto cut = [&](std::map<Addr, Piece>::iterator run) {
    Addr run_end = run->first + run->second.size;
    Piece piece = run->second;
    if (run->first < addr)
      run->second.size = addr - run->first;
    else
      run = pieces_.erase(run);
    if (run_end > end) pieces_[end] = {run_end - end, piece.stream, piece.pool};
    return run;
  };
  if (auto it = pieces_.lower_bound(addr); it != pieces_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size > addr) cut(prev);
  }
  for (auto it = pieces_.lower_bound(addr); it != pieces_.end() && it->first < end;) it = cut(it);
  upstream().unmap_pages(addr, size);
}

const StreamRecordingDevice::Piece* StreamRecordingDevice::piece_at(Addr addr) const {
  auto it = pieces_.upper_bound(addr);
  if (it == pieces_.begin()) return nullptr;
  --it;
  return addr < it->first + it->second.size ? &it->second : nullptr;
}

std::optional<StreamIndex> StreamRecordingDevice::stream_at(Addr addr) const {
  const Piece* p = piece_at(addr);
  return p ? std::optional<StreamIndex>(p->stream) : std::nullopt;
}

PoolIndex StreamRecordingDevice::pool_at(Addr addr) const {
  const Piece* p = piece_at(addr);
  return p ? p->pool : 0;
}

namespace {

// Segments placed as `fraglab replay` places them (AddressModel::Auto), so that the state shown for the model
// of the recording allocator is the recording's own, block for block.
SimDeviceConfig auto_addresses(std::optional<uint64_t> capacity) {
  SimDeviceConfig config{capacity};
  config.addresses = AddressModel::Auto;
  return config;
}

}  // namespace

SteppedReplay::SteppedReplay(const Trace& trace, const PolicySpec& spec, std::optional<uint64_t> capacity)
    : trace_(trace),
      sim_(with_addresses_for(auto_addresses(capacity), spec, trace.meta, &trace.events), &trace.events,
           &trace.meta.initial),
      streams_(sim_),
      tracking_(streams_) {
  policy_ = make_policy(spec, tracking_, trace.meta, &trace.events);
  let_policy_enforce(*policy_, sim_.limiter());
  ReplayOptions options;
  options.on_oom = OnOom::Skip;  // a failed allocation is counted and the replay goes on
  engine_ = std::make_unique<ReplayEngine>(*policy_, tracking_, options);
  engine_->set_policy_name("policy '" + spec.text + "'");
  // A history begun mid-run starts from the state at its first entry, as ReplayEngine::run() does: without
  // it, a policy that models the recording allocator laid the prologue out anew, and every state shown
  // (the peak of a snapshot without history included) was another allocator's.
  engine_->establish_initial_state(trace.meta.initial);
}

void SteppedReplay::note_awaiting(const Event& e) {
  const bool requested = e.kind == EventKind::FreeRequested;
  if (!requested && e.kind != EventKind::Free && e.kind != EventKind::Alloc) return;
  if (requested && !(e.id < engine_->blocks().size() && engine_->blocks()[e.id].live)) return;
  if (e.id >= awaiting_.size()) {
    if (!requested) return;
    awaiting_.resize(e.id + 1u, 0);
  }
  awaiting_[e.id] = requested;
}

bool SteppedReplay::advance_to(uint64_t index) {
  for (; position_ < index && position_ < trace_.events.size(); ++position_) {
    const Event& e = trace_.events[position_];
    streams_.set_pool(e.kind == EventKind::Alloc || e.kind == EventKind::Oom ? e.pool : 0);
    engine_->apply(e, position_);
    note_awaiting(e);
  }
  return position_ == index;
}

bool SteppedReplay::probe(const Probe& request) {
  // An id no event uses: past every id the engine has seen.
  auto id = static_cast<AllocId>(engine_->blocks().size());
  engine_->settle_peak();
  auto block = policy_->allocate(AllocRequest{id, request.size, request.stream, request.event_index});
  if (!block) return false;
  policy_->deallocate(*block);
  return true;
}

}  // namespace fraglab
