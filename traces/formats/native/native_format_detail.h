// Internals of the native format (traces/formats/native/native_format.h), shared with its tests, which
// build deliberately broken files block by block.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/trace.h"

namespace fraglab::native_detail {

inline constexpr char kMagic[8] = {'F', 'L', 'T', 'R', 'A', 'C', 'E', '\0'};
inline constexpr char kEndMagic[8] = {'F', 'L', 'T', 'R', 'E', 'N', 'D', '\0'};
inline constexpr char kBlockTag[4] = {'F', 'L', 'B', 'K'};
inline constexpr char kMetaTag[4] = {'F', 'L', 'M', 'T'};
inline constexpr uint32_t kHeaderBytes = 32;
inline constexpr uint32_t kBlockHeaderBytes = 24;
inline constexpr uint32_t kSectionBytes = 24;  // the meta section's header
inline constexpr uint32_t kFooterBytes = 32;
inline constexpr uint32_t kMaxBlockEvents = 1u << 22;  // bounds a block's memory (~170 MB of events)
inline constexpr uint64_t kMaxMetaBytes = 1ull << 32;  // stacks of huge traces stay well below

// Columns of a block, in file order, and the flag bits that say which events have a value.
enum Column { kId, kTime, kSize, kAddr, kStream, kStack, kColumns };
inline constexpr uint32_t kColumnTableBytes = 4 * kColumns;
inline constexpr uint8_t kKindMask = 0x0f;
inline constexpr uint8_t kHasStream = 0x10, kHasStack = 0x20, kReservedFlags = 0xc0;

// "zstd: " and the library's name for an error code.
std::string zstd_error(size_t code);

void put_u32(uint8_t* p, uint32_t v);
void put_u64(uint8_t* p, uint64_t v);
uint32_t get_u32(const uint8_t* p);
uint64_t get_u64(const uint8_t* p);

struct BlockScratch {
  std::array<std::vector<uint8_t>, kColumns> columns;
};

// Raw (uncompressed) bytes of one block. No validation: the writer checks events first.
void encode_block(const Event* events, size_t count, std::vector<uint8_t>& raw, BlockScratch& scratch);

struct BlockLimits {
  size_t streams = 1, stacks = 1;  // sizes of the meta's tables
};
// Allocation ids must follow the dense-slot rule of trace.h: an alloc takes an id that is
// not live and at most one past the highest seen; frees name live ids. Checking this keeps a
// corrupt file from making the replay engine size its vectors by a garbage id.
class LiveIds {
 public:
  const char* apply(const Event& e);  // nullptr, or what is wrong

 private:
  std::vector<uint8_t> live_;
};

__attribute__((always_inline)) inline const char* LiveIds::apply(const Event& e) {
  switch (e.kind) {
    case EventKind::Alloc:
      if (e.id < live_.size()) {
        if (live_[e.id]) return "alloc of an id that is already live";
        live_[e.id] = 1;
      } else if (e.id == live_.size()) {
        live_.push_back(1);
      } else {
        return "alloc id skips past the dense id range";
      }
      return nullptr;
    case EventKind::Free:
      if (e.id >= live_.size() || !live_[e.id]) return "free of an id that is not live";
      live_[e.id] = 0;
      return nullptr;
    case EventKind::FreeRequested:
      if (e.id >= live_.size() || !live_[e.id]) return "free_requested of an id that is not live";
      return nullptr;
    default:
      return nullptr;
  }
}

// Readable bytes decode_block needs after raw[raw_size - 1] (varints and fixed-width fields
// are read unchecked and the cursor tested after).
inline constexpr size_t kDecodePadding = 16;
// Called with the offset inside the raw block and what is wrong; must throw.
using BlockErrorFn = std::function<void(uint64_t raw_offset, const std::string& what)>;
// Decodes `count` events, checking streams and stacks against `limits` and, when `live` is
// given, ids against the live set.
void decode_block(const uint8_t* raw, size_t raw_size, Event* events, size_t count, const BlockLimits& limits,
                  LiveIds* live, const BlockErrorFn& on_error);

nlohmann::json meta_to_json(const TraceMeta& meta);
TraceMeta meta_from_json(const nlohmann::json& j);
// The meta's "event_pools" ([[event index, pool], ...]), checked against the trace's event
// and pool counts.
std::vector<std::pair<uint64_t, PoolIndex>> event_pools_from_json(const nlohmann::json& j, uint64_t events,
                                                                  size_t pools);
// The meta's "event_compile_contexts" ([[event index, context], ...]), checked the same way against the
// compile_contexts list.
std::vector<std::pair<uint64_t, ContextIndex>> event_contexts_from_json(const nlohmann::json& j, uint64_t events,
                                                                        size_t contexts);

}  // namespace fraglab::native_detail
