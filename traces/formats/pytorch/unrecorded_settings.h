// The allocator settings of a PyTorch snapshot that records none, read from how the recording allocator
// behaved.
//
// Only newer snapshots record `allocator_settings` (torch/csrc/cuda/memory_snapshot.cpp, from the
// allocator's config_metadata); PyTorch 2.0's and the snapshots a tool rewrote carry none, so the model
// would replay them under PyTorch's defaults. Yet the jobs of that era often ran with settings that change where memory
// goes: `max_split_size_mb:128` or `:512` (the advice of PyTorch's own OOM message then),
// `garbage_collection_threshold:0.6`, `roundup_power2_divisions:4`. No history entry names them; the
// device calls and the blocks they served show them, and the model tells which: a setting that makes the
// model follow the recording further than PyTorch's defaults do is the one the job ran with.
//
// The search goes over one setting at a time, in the order their effects show (max_split_size_mb decides
// which cached blocks serve at all; rounding which sizes are asked; the collector, under a memory
// fraction, which segments go back), each over the values users set, a value taken only where it makes
// the model follow further, and round again while a round improves (coordinate descent). Expandable segments are read
// from the device calls (traces/formats/pytorch/settings_inference.h), not searched. It runs only where the trace
// records no settings and the model, under the defaults, disagrees with the recording.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "traces/formats/pytorch/snapshot_model.h"
#include "traces/trace.h"

namespace fraglab {

// Settings as PyTorch's snapshot records them (torch/csrc/cuda/memory_snapshot.cpp): the settings text
// and the parsed values, flattened as the importer flattens them.
struct InferredSettings {
  uint64_t max_split_size_mb = 0;             // 0: unset
  uint64_t roundup_power2_divisions = 0;      // 0: off (one value for every interval)
  double garbage_collection_threshold = 0.0;  // 0: off
  bool operator==(const InferredSettings&) const = default;
  // PYTORCH_CUDA_ALLOC_CONF text: "max_split_size_mb:128,roundup_power2_divisions:4".
  std::string conf() const;
  // TraceMeta::allocator_settings as a snapshot that recorded these would hold.
  std::map<std::string, std::string> as_recorded() const;
};

// Whether the search below applies: a history, and no settings recorded.
bool settings_unrecorded(const Trace& trace);

// Re-runs the importer's inference of pools and windows on a trace as read, under its allocator_settings.
using InferUnderSettings = std::function<void(Trace&)>;

// Where `trace` (already inferred under the defaults from `unread`, the trace as read) records no settings
// and `model` (traces/formats/pytorch/settings_inference.h, first_divergence) disagrees with it, tries the usual
// values; a trace read under better settings replaces `trace`, with TraceMeta::settings_inferred set. Without a
// divergence finder every reading agrees as well as any other: `trace` stays.
void infer_unrecorded_settings(Trace& trace, const Trace& unread, const InferUnderSettings& infer,
                               const SnapshotModel& model);

}  // namespace fraglab
