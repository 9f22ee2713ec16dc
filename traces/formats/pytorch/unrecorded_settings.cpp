#include "traces/formats/pytorch/unrecorded_settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "traces/formats/pytorch/settings_inference.h"

namespace fraglab {

std::string InferredSettings::conf() const {
  std::vector<std::string> parts;
  if (max_split_size_mb) parts.push_back(fmt::format("max_split_size_mb:{}", max_split_size_mb));
  if (roundup_power2_divisions) parts.push_back(fmt::format("roundup_power2_divisions:{}", roundup_power2_divisions));
  if (garbage_collection_threshold > 0)
    parts.push_back(fmt::format("garbage_collection_threshold:{}", garbage_collection_threshold));
  return fmt::format("{}", fmt::join(parts, ","));
}

std::map<std::string, std::string> InferredSettings::as_recorded() const {
  std::map<std::string, std::string> out;
  out["PYTORCH_CUDA_ALLOC_CONF"] = conf();
  out["max_split_size"] = max_split_size_mb ? std::to_string(max_split_size_mb * 1024 * 1024) : "-1";
  out["garbage_collection_threshold"] = fmt::format("{}", garbage_collection_threshold);
  // The recorded dict {interval start in MiB: divisions} over the 16 intervals from 1 MiB.
  for (uint64_t mb = 1; mb <= 32768; mb *= 2)
    out["roundup_power2_divisions." + std::to_string(mb)] = std::to_string(roundup_power2_divisions);
  return out;
}

namespace {

// The values users set, most common first (a tie keeps the earlier). max_split_size_mb is at least 20
// (parseMaxSplitSize); 128 and 512 were PyTorch's own OOM advice's usual readings. A roundup of 1 rounds
// nothing (round_size rounds only with more than one division).
constexpr uint64_t kMaxSplitMb[] = {128, 512, 64, 256, 1024, 32, 100, 200, 2048, 4096, 24};
constexpr uint64_t kRoundup[] = {4, 2, 8, 16};
constexpr double kCollector[] = {0.6, 0.5, 0.7, 0.8, 0.9, 0.4};
constexpr int kRounds = 3;
// Each try reads the trace again (pool inference, the model's replays): the tries stop at about this many
// events replayed in all, a few seconds, so a long history without settings imports in bounded time.
constexpr uint64_t kReplayBudget = 6'000'000;

// The largest size the trace asks for or holds.
uint64_t largest_size(const Trace& trace) {
  uint64_t most = 0;
  for (const Event& e : trace.events) most = std::max(most, e.size);
  for (const RecordedSegment& s : trace.meta.segments) most = std::max(most, s.total_size);
  for (const RecordedSegment& s : trace.meta.initial.segments) most = std::max(most, s.total_size);
  return most;
}

class Search {
 public:
  Search(Trace& trace, const Trace& unread, const InferUnderSettings& infer, const SnapshotModel& model)
      : trace_(trace),
        unread_(unread),
        infer_(infer),
        model_(model),
        best_(agreement(trace, model)),
        tries_left_(kReplayBudget / std::max<uint64_t>(trace.events.size(), 1)) {
    // A max_split_size above every size the trace holds splits and serves as unset does.
    const uint64_t largest = largest_size(trace);
    for (uint64_t mb : kMaxSplitMb)
      if (mb * 1024 * 1024 <= largest) max_split_values_.push_back(mb);
  }

  // Coordinate descent: each setting over its values with the others as chosen, again until a round
  // changes nothing (a setting whose effect hid behind another's shows once that one is right). Then
  // max_split_size_mb and the collector together, where neither alone moved the model further (the
  // collector frees what max_split_size leaves unsplit).
  void run() {
    for (int round = 0; round < kRounds && !exact(); ++round) {
      const uint64_t before = best_;
      if (round > 0) try_with([&](InferredSettings& s) { s.max_split_size_mb = 0; });
      for (uint64_t mb : max_split_values_) try_with([&](InferredSettings& s) { s.max_split_size_mb = mb; });
      if (round > 0) try_with([&](InferredSettings& s) { s.roundup_power2_divisions = 0; });
      for (uint64_t d : kRoundup) try_with([&](InferredSettings& s) { s.roundup_power2_divisions = d; });
      if (round > 0) try_with([&](InferredSettings& s) { s.garbage_collection_threshold = 0; });
      for (double t : kCollector) try_with([&](InferredSettings& s) { s.garbage_collection_threshold = t; });
      if (best_ == before) break;
    }
    const InferredSettings around = chosen_;
    for (uint64_t mb : max_split_values_)
      for (double t : kCollector)
        try_with([&](InferredSettings& s) {
          s = around;
          s.max_split_size_mb = mb;
          s.garbage_collection_threshold = t;
        });
  }

 private:
  bool exact() const { return best_ == UINT64_MAX; }

  // The trace read again under the best settings so far with one changed: kept where the model follows
  // it further.
  template <class Change>
  void try_with(Change change) {
    if (exact() || tries_left_ == 0) return;
    InferredSettings candidate = chosen_;
    change(candidate);
    if (candidate == chosen_ || !tried_.insert(candidate.conf()).second) return;
    --tries_left_;
    Trace t = unread_;
    t.meta.allocator_settings = candidate.as_recorded();
    t.meta.settings_inferred = true;
    infer_(t);
    const uint64_t a = agreement(t, model_);
    if (a <= best_) return;
    best_ = a;
    chosen_ = candidate;
    trace_ = std::move(t);
  }

  Trace& trace_;
  const Trace& unread_;
  const InferUnderSettings& infer_;
  const SnapshotModel& model_;
  uint64_t best_;
  uint64_t tries_left_;
  std::vector<uint64_t> max_split_values_;
  std::set<std::string> tried_;
  InferredSettings chosen_;
};

}  // namespace

bool settings_unrecorded(const Trace& trace) {
  return trace.meta.allocator_settings.empty() && !trace.meta.history_absent && !trace.events.empty();
}

void infer_unrecorded_settings(Trace& trace, const Trace& unread, const InferUnderSettings& infer,
                               const SnapshotModel& model) {
  if (!settings_unrecorded(trace) || !model.find_divergence) return;  // no judge: nothing to search by
  Search(trace, unread, infer, model).run();
}

}  // namespace fraglab
