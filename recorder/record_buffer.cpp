#include "recorder/record_buffer.h"

namespace fraglab::record {

RecordBuffer::~RecordBuffer() {
  for (auto& c : chunks_) delete[] c.load(std::memory_order_acquire);
}

Record* RecordBuffer::chunk(uint64_t index) {
  Record* c = chunks_[index].load(std::memory_order_acquire);
  if (c) return c;
  Record* fresh = new Record[kChunkSize]();
  if (chunks_[index].compare_exchange_strong(c, fresh, std::memory_order_acq_rel)) return fresh;
  delete[] fresh;  // another thread got there first; c now holds its chunk
  return c;
}

bool RecordBuffer::append(CallKind kind, uint64_t ptr, uint64_t size, uint64_t stream, int64_t time_ns) {
  if (closed_.load(std::memory_order_acquire)) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  uint64_t slot = next_.fetch_add(1, std::memory_order_relaxed);
  if (slot >= kChunkSize * kMaxChunks) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  Record& r = chunk(slot / kChunkSize)[slot % kChunkSize];
  r.ptr = ptr;
  r.size = size;
  r.stream = stream;
  r.time_ns = time_ns;
  r.kind = kind;
  r.ready.store(true, std::memory_order_release);
  return true;
}

uint64_t RecordBuffer::close() {
  closed_.store(true, std::memory_order_release);
  uint64_t n = next_.load(std::memory_order_acquire);
  return n < kChunkSize * kMaxChunks ? n : kChunkSize * kMaxChunks;
}

const Record* RecordBuffer::at(uint64_t i) const {
  Record* c = chunks_[i / kChunkSize].load(std::memory_order_acquire);
  if (!c) return nullptr;
  const Record& r = c[i % kChunkSize];
  return r.ready.load(std::memory_order_acquire) ? &r : nullptr;
}

}  // namespace fraglab::record
