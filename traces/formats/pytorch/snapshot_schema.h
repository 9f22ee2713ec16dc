// A PyTorch snapshot's schema as the importer reads it: the trace entries' actions and fields
// (torch/csrc/cuda/memory_snapshot.cpp writes them; TraceEntry::Action in c10/cuda/CUDACachingAllocator.h),
// the slots the parser's fast path fills by field (pickle::FlatItem), and a cache that recognises a
// memoized key by identity.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "traces/formats/pytorch/pickle_reader.h"

namespace fraglab::snapshot_schema {

using pickle::Document;
using pickle::Kind;
using pickle::Value;

enum class Action : uint8_t {
  Alloc,
  FreeRequested,
  FreeCompleted,
  SegmentAlloc,
  SegmentFree,
  SegmentMap,
  SegmentUnmap,
  Oom,
  Snapshot,
  UserDefined,
  Annotate,
  Unknown
};

inline Action parse_action(std::string_view s) {
  if (s == "alloc") return Action::Alloc;
  if (s == "free_requested") return Action::FreeRequested;
  if (s == "free_completed") return Action::FreeCompleted;
  if (s == "segment_alloc") return Action::SegmentAlloc;
  if (s == "segment_free") return Action::SegmentFree;
  if (s == "segment_map") return Action::SegmentMap;
  if (s == "segment_unmap") return Action::SegmentUnmap;
  if (s == "oom") return Action::Oom;
  if (s == "snapshot") return Action::Snapshot;
  if (s == "user_defined") return Action::UserDefined;
  if (s == "annotate") return Action::Annotate;   // a later PyTorch's memory annotation: a marker
  if (s == "free") return Action::FreeCompleted;  // the first traces' (PyTorch 1.13) name for a completed free
  return Action::Unknown;
}

// Maps str Values to small codes. Pickle memoizes repeated strings, so after the first
// sighting a key is recognised by identity (8-byte compare) instead of by its text: a small
// open-addressed table by the Value's bits, at most 64 remembered (a miss parses the text).
template <class Code>
class StrCache {
 public:
  template <class Parse>
  Code get(const Document& doc, Value v, Parse parse) {
    size_t i = (v.payload() * 0x9e3779b97f4a7c15ull) >> 56;
    for (int probe = 0; probe < 8; ++probe, i = (i + 1) % kSlots) {
      Slot& slot = slots_[i];
      if (slot.seen.same_object(v)) return slot.code;
      if (slot.seen.kind() != Kind::None) continue;
      Code code = parse(doc.as_str(v, "key"));
      if (used_ < 64) slot = {v, code}, ++used_;
      return code;
    }
    return parse(doc.as_str(v, "key"));
  }

 private:
  static constexpr size_t kSlots = 256;
  struct Slot {
    Value seen;  // None: empty (only str Values are looked up)
    Code code{};
  };
  std::array<Slot, kSlots> slots_{};
  size_t used_ = 0;
};

enum class Field : uint8_t {
  Action,
  Addr,
  DeviceFree,
  Size,
  Stream,
  TimeUs,
  Frames,
  UserMetadata,
  Name,
  CompileContext,
  Other
};

// An entry's values by slot (pickle::FlatItem): 'addr' and 'device_free' share one (the last given
// counts, as in the dict).
enum Slot : int {
  kActionSlot,
  kAddrSlot,
  kSizeSlot,
  kStreamSlot,
  kTimeSlot,
  kFramesSlot,
  kUserMetadataSlot,
  kNameSlot,
  kCompileContextSlot
};
inline constexpr std::array<int, 11> kSlotOfField = {kActionSlot, kAddrSlot,           kAddrSlot,   kSizeSlot,
                                                     kStreamSlot, kTimeSlot,           kFramesSlot, kUserMetadataSlot,
                                                     kNameSlot,   kCompileContextSlot, -1};

inline Field parse_field(std::string_view s) {
  if (s == "action") return Field::Action;
  if (s == "addr") return Field::Addr;
  if (s == "device_free") return Field::DeviceFree;
  if (s == "size") return Field::Size;
  if (s == "stream") return Field::Stream;
  if (s == "time_us") return Field::TimeUs;
  if (s == "frames") return Field::Frames;
  if (s == "user_metadata") return Field::UserMetadata;
  if (s == "name") return Field::Name;                       // an `annotate` entry's
  if (s == "compile_context") return Field::CompileContext;  // "N/A" outside torch.compile
  return Field::Other;
}

}  // namespace fraglab::snapshot_schema
