// PytorchAllocatorConfig: the settings of PyTorch's CUDA caching allocator, parsed from
// PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF text exactly as PyTorch 2.11 parses it.
//
// Source: c10/core/AllocatorConfig.{h,cpp} (AllocatorConfig::parseArgs, lexArgs,
// parseMaxSplitSize, parseRoundUpPower2Divisions, roundup_power2_divisions(size)) and
// c10/cuda/CUDAAllocatorConfig.{h,cpp}, which forwards to it. The same tokenizer and the
// same rules are used, quirks included: e.g. in `roundup_power2_divisions:[256:1,512:2,>:4]`
// the `>` entry overwrites the interval of the entry before it, as in PyTorch.
// Only the settings that change where memory goes are kept; the pinned-memory and
// locking options are accepted and ignored (they don't change placement).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "allocators/policy_options.h"

namespace fraglab::detail {

// The `pytorch` policy's option to start from a trace's recorded allocator_settings (the
// memory-state report builds the same settings, so it reads the same declaration).
constexpr BoolOption kRecordedSettings{"recorded_settings", true, "start from the trace's recorded allocator_settings"};

constexpr uint64_t kMiB = 1024 * 1024;
// The 16 power-of-two intervals roundup_power2_divisions applies to: [1 MiB, 2 MiB) is
// interval 0 (sizes below it use interval 0 too), [32 GiB, 64 GiB) and above use 15.
constexpr size_t kRoundUpPowerOfTwoIntervals = 16;

// The settings text a recording's process started from, and the variable it came from.
// PyTorch takes the first of PYTORCH_CUDA_ALLOC_CONF, PYTORCH_HIP_ALLOC_CONF (ROCm) and
// PYTORCH_ALLOC_CONF that is set, the newer backend-neutral name last "for backward
// compatibility" (c10/core/AllocatorConfig.cpp, AcceleratorAllocatorConfig::instance(); before
// that c10/cuda/CUDAAllocatorConfig.h, CUDAAllocatorConfig::instance(), in the same order). A
// snapshot stores the parsed text under "PYTORCH_CUDA_ALLOC_CONF" whichever variable it came
// from (torch/csrc/cuda/memory_snapshot.cpp: last_allocator_settings); traces from elsewhere
// (a recorder that saved the environment) may carry any of the names, read in that order.
struct RecordedConf {
  const char* variable = nullptr;
  const std::string* text = nullptr;
  explicit operator bool() const { return text != nullptr; }
};
RecordedConf recorded_conf(const std::map<std::string, std::string>& settings);

// kMinLargeAlloc in MiB: large_segment_size_mb must exceed it.
constexpr uint64_t kMinLargeAllocMb = 10;

struct PytorchAllocatorConfig {
  // large_segment_size_mb (PyTorch 2.11, AcceleratorAllocatorConfig::large_segment_size): the segment a
  // request of 1 to 10 MiB gets (get_allocation_size) and the page of an expandable large pool; kLargeBuffer
  // by default.
  uint64_t large_segment_size = 20 * kMiB;
  uint64_t max_split_size = UINT64_MAX;              // max_split_size_mb; unset = SIZE_MAX
  uint64_t max_non_split_rounding_size = 20 * kMiB;  // max_non_split_rounding_mb (the large segment size)
  double garbage_collection_threshold = 0.0;         // 0 = off
  bool expandable_segments = false;
  std::array<uint64_t, kRoundUpPowerOfTwoIntervals> roundup_power2_divisions{};  // 0 = off
  // per_process_memory_fraction (PyTorch 2.11's CUDAAllocatorConfig): a memory fraction set from the
  // settings, as set_per_process_memory_fraction sets one; unset where the settings name none.
  std::optional<double> per_process_memory_fraction;

  // PyTorch's parseArgs: resets max_split_size, roundup_power2_divisions and
  // garbage_collection_threshold to their defaults, then applies `conf`.
  static PytorchAllocatorConfig parse(const std::string& conf);
  // Applies `conf` on top of the current values (command-line overrides), with PyTorch 2.11's keys and
  // checks. Throws PolicyConfigError with PyTorch's message on text PyTorch rejects; with `unknown_keys`,
  // keys this model does not know (a later PyTorch's) are listed there and skipped instead.
  void apply(const std::string& conf, std::vector<std::string>* unknown_keys = nullptr);
  // Applies a snapshot's `allocator_settings` (the recorded settings text, recorded_conf(), then the
  // parsed values the allocator reported: max_split_size, garbage_collection_threshold,
  // expandable_segments, roundup_power2_divisions).
  // A recorded text's keys that no PyTorch this model knows accepts (the recording's did) are skipped and
  // listed in `unknown_keys` where given.
  void apply_recorded(const std::map<std::string, std::string>& settings,
                      std::vector<std::string>* unknown_keys = nullptr);

  // AllocatorConfig::roundup_power2_divisions(size): the divisions for size's interval. Inline: every
  // request asks (round_size).
  uint64_t divisions_for(uint64_t size) const {
    // Intervals start at 1 MiB (2^20); smaller sizes use interval 0, larger than 64 GiB the last.
    int index = std::bit_width(size) - 1 - 20;
    index = std::clamp(index, 0, static_cast<int>(kRoundUpPowerOfTwoIntervals) - 1);
    return roundup_power2_divisions[static_cast<size_t>(index)];
  }
  // The settings as PYTORCH_CUDA_ALLOC_CONF text (only what differs from the defaults).
  std::string to_conf() const;
};

}  // namespace fraglab::detail
