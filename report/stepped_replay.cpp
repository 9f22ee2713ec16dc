#include "report/stepped_replay.h"

namespace fraglab {

std::optional<Addr> StreamRecordingDevice::allocate_segment(uint64_t size, StreamIndex stream) {
  auto addr = upstream_.allocate_segment(size, stream);
  if (addr) pieces_[*addr] = {size, stream};
  return addr;
}

void StreamRecordingDevice::free_segment(Addr addr, uint64_t size) {
  pieces_.erase(addr);
  upstream_.free_segment(addr, size);
}

bool StreamRecordingDevice::map_pages(Addr addr, uint64_t size, StreamIndex stream) {
  if (!upstream_.map_pages(addr, size, stream)) return false;
  pieces_[addr] = {size, stream};
  return true;
}

void StreamRecordingDevice::unmap_pages(Addr addr, uint64_t size) {
  // Unmapping may cut mapped runs anywhere: a run straddling the start keeps its part before
  // the range, and any run's part past the range's end stays as a run of its own.
  const Addr end = addr + size;
  auto cut = [&](std::map<Addr, std::pair<uint64_t, StreamIndex>>::iterator run) {
    Addr run_end = run->first + run->second.first;
    StreamIndex stream = run->second.second;
    if (run->first < addr) run->second.first = addr - run->first;
    else run = pieces_.erase(run);
    if (run_end > end) pieces_[end] = {run_end - end, stream};
    return run;
  };
  if (auto it = pieces_.lower_bound(addr); it != pieces_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.first > addr) cut(prev);
  }
  for (auto it = pieces_.lower_bound(addr); it != pieces_.end() && it->first < end;) it = cut(it);
  upstream_.unmap_pages(addr, size);
}

std::optional<StreamIndex> StreamRecordingDevice::stream_at(Addr addr) const {
  auto it = pieces_.upper_bound(addr);
  if (it == pieces_.begin()) return std::nullopt;
  --it;
  if (addr >= it->first + it->second.first) return std::nullopt;
  return it->second.second;
}

SteppedReplay::SteppedReplay(const Trace& trace, const PolicySpec& spec, std::optional<uint64_t> capacity)
    : trace_(trace), sim_(SimDeviceConfig{capacity}), streams_(sim_), tracking_(streams_) {
  policy_ = make_policy(spec, tracking_, trace.meta, &trace.events);
  ReplayOptions options;
  options.on_oom = OnOom::Skip;  // a failed allocation is counted and the replay goes on
  engine_ = std::make_unique<ReplayEngine>(*policy_, tracking_, options);
}

bool SteppedReplay::advance_to(uint64_t index) {
  for (; position_ < index && position_ < trace_.events.size(); ++position_)
    engine_->apply(trace_.events[position_], position_);
  return position_ == index;
}

bool SteppedReplay::probe(const Probe& request) {
  // An id no event uses: past every id the engine has seen.
  auto id = static_cast<AllocId>(engine_->blocks().size());
  auto block = policy_->allocate(AllocRequest{id, request.size, request.stream, request.event_index});
  if (!block) return false;
  policy_->deallocate(*block);
  return true;
}


}  // namespace fraglab
