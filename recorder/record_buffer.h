// The recorder's event buffer: many threads append, one thread (at exit) reads.
//
// Appending is one atomic fetch_add for a slot plus plain stores into it, so a CUDA call
// pays tens of nanoseconds for being recorded and never waits on a lock. Slots live in
// chunks allocated on first touch (a compare-and-swap decides which thread's chunk wins),
// so memory grows with the trace, up to kMaxChunks * kChunkSize records; past that,
// records are counted as dropped rather than stalling the program.
#pragma once

#include <atomic>
#include <cstdint>

namespace fraglab::record {

enum class CallKind : uint8_t { Malloc, Free, MallocFailed };

struct Record {
  uint64_t ptr;
  uint64_t size;
  uint64_t stream;  // cudaStream_t handle (0 = legacy default stream)
  int64_t time_ns;  // steady clock, since the recorder started
  CallKind kind;
  std::atomic<bool> ready;  // set last: the slot is complete
};

class RecordBuffer {
 public:
  RecordBuffer() = default;
  RecordBuffer(const RecordBuffer&) = delete;
  RecordBuffer& operator=(const RecordBuffer&) = delete;
  // Frees the chunks. The interposer's own buffer is never destroyed (calls may arrive
  // during exit); buffers owned by tests and tools are.
  ~RecordBuffer();

  static constexpr uint64_t kChunkSize = 1u << 16;
  static constexpr uint64_t kMaxChunks = 1u << 12;  // 268M records

  // Appends a record; false (and counted) when the buffer is full or closed.
  bool append(CallKind kind, uint64_t ptr, uint64_t size, uint64_t stream, int64_t time_ns);
  // Stops recording: appends from now on are dropped. Returns the number of slots taken.
  uint64_t close();
  // Slot i (i < the count close() returned); null if its writer never finished it.
  const Record* at(uint64_t i) const;
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  Record* chunk(uint64_t index);

  std::atomic<uint64_t> next_{0};
  std::atomic<bool> closed_{false};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<Record*> chunks_[kMaxChunks] = {};
};

}  // namespace fraglab::record
