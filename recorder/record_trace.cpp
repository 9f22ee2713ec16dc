#include "recorder/record_trace.h"

#include <unordered_map>

#include "traces/stream_interner.h"

namespace fraglab::record {

Trace to_trace(const RecordBuffer& buffer, uint64_t count, const std::string& source) {
  Trace trace;
  trace.meta.source = source;
  trace.meta.format = "fraglab-record";
  trace.meta.allocator_settings["recorded_api"] = "CUDA runtime (cudaMalloc, cudaMallocAsync, cudaMallocFromPoolAsync)";
  IdSlots ids;
  struct Live {
    AllocId id;
    StreamIndex stream;
  };
  std::unordered_map<uint64_t, Live> live;  // device pointer -> allocation
  StreamInterner streams{trace.meta};
  trace.events.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const Record* r = buffer.at(i);
    if (!r) continue;  // a call still in flight when recording stopped
    Event e;
    e.time_us = r->time_ns / 1000;
    e.stream = streams.intern(r->stream);
    switch (r->kind) {
      case CallKind::Malloc: {
        if (r->ptr == 0) continue;  // cudaMalloc(0) returns nullptr: nothing to free later
        e.kind = EventKind::Alloc;
        e.id = ids.acquire();
        e.size = r->size;
        e.addr = r->ptr;
        auto [it, fresh] = live.try_emplace(r->ptr, Live{e.id, e.stream});
        if (!fresh) {
          // The same address handed out twice without a free in between: the free was
          // not seen (made through an API we do not interpose). Close the old one here.
          trace.events.push_back(Event{EventKind::Free, it->second.stream, it->second.id, 0, r->ptr, e.time_us, 0});
          ids.release(it->second.id);
          it->second = Live{e.id, e.stream};
        }
        break;
      }
      case CallKind::Free: {
        auto it = live.find(r->ptr);
        if (it == live.end()) {
          if (r->ptr) ++trace.meta.dropped_unknown_frees;
          continue;
        }
        e.kind = EventKind::Free;
        e.id = it->second.id;
        e.addr = r->ptr;
        ids.release(e.id);
        live.erase(it);
        break;
      }
      case CallKind::MallocFailed:
        e.kind = EventKind::Oom;
        e.size = r->size;
        break;
    }
    trace.events.push_back(e);
  }
  return trace;
}

}  // namespace fraglab::record
