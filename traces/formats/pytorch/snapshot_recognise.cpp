// The PyTorch snapshot's recognisers (trace_io.cpp's format table): a pickle's first opcodes, or a JSON
// document whose first object has a snapshot's (or a segment list's) own keys.
#include <array>
#include <string_view>

#include "traces/formats/format_sniff.h"
#include "traces/formats/jsonl/jsonl_format.h"
#include "traces/formats/pytorch/pytorch_snapshot.h"

namespace fraglab {

namespace {

// torch/csrc/cuda/memory_snapshot.cpp: the snapshot dict's keys (allocator_settings alone
// proves nothing: a JSON Lines header has one too) and a segment dict's.
constexpr std::array<std::string_view, 5> kSnapshotKeys = {"device_traces", "segments", "external_annotations",
                                                           "host_segments", "host_traces"};
constexpr std::array<std::string_view, 4> kSegmentKeys = {"address", "total_size", "blocks", "segment_type"};

}  // namespace

bool looks_like_pickle(std::string_view head) {
  if (head.size() < 2) return false;
  auto b0 = static_cast<unsigned char>(head[0]);
  char b1 = head[1];
  if (b0 == 0x80) return b1 >= 2 && b1 <= 5;  // PROTO n: protocol 2 and later always start with it
  // Protocols 0 and 1 have no PROTO. Python's pickler opens a dict or list with MARK + DICT/LIST
  // (protocol 0) or EMPTY_DICT/EMPTY_LIST and a memo PUT (protocol 1).
  if (b0 == '(') return std::string_view("dlt}])").find(b1) != std::string_view::npos;
  if (b0 == '}' || b0 == ']' || b0 == ')') return std::string_view("q(r.").find(b1) != std::string_view::npos;
  return false;
}

bool looks_like_json_snapshot(std::string_view head) {
  if (!starts_as_json(head)) return false;
  JsonFirstKeys k = json_first_keys(head);
  if (k.top_is_array) return k.any_of(kSegmentKeys);
  return k.any_of(kSnapshotKeys) && !k.any_of(kJsonlKeys);
}

}  // namespace fraglab
