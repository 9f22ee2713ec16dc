// The batch what-if (`fraglab fit`): from probe snapshots of one program at two or more batch sizes,
// the program's allocation trace at any batch, and the largest batch that fits a capacity under each
// allocator setting.
//
// 1. Align. The probes' histories are matched allocation by allocation against the reference (the
//    probe of the largest batch). Where every probe made the same sequence of allocations and frees
//    (the same kernels, only the tensors' sizes differ), the alignment is exact. Otherwise a
//    resynchronising walk matches allocations by stream, pool, call stack (when recorded) and a size
//    that could belong to the same tensor; the reference's unmatched allocations keep their size.
// 2. Model each allocation's requested size as a function of the batch: constant, linear, or (with
//    three or more probes) quadratic, the lowest degree that passes through every probe exactly, in
//    integers (sequence length enters attention squared; a square is believed from four probes, since
//    three points always lie on one). Sizes no such polynomial passes through
//    are "irregular" (cuDNN workspaces whose algorithm changes with the shape) and are extrapolated
//    linearly from the two largest probes.
// 3. Synthesize the reference's history at batch B with the modelled sizes (the recording's own
//    segment calls and OOM entries dropped: they belong to its batch), and replay it through the
//    policy (PyTorch's allocator at each candidate setting) on the capacity. A batch fits when every
//    allocation is served, as a process under set_per_process_memory_fraction runs without an OOM.
// 4. Search: the live bytes bound the batch from above (no setting fits more live bytes than the
//    capacity); below it, the largest batch whose replay fits, per setting.
//
// How sure: the alignment says how much of the reference matched; with three or more probes the model
// built without the largest predicts it, and that prediction's peak is compared with the recorded one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

struct BatchProbe {
  std::string name;  // how reports name it (its path)
  uint64_t batch = 0;
  Trace trace;
};

// Probes a model takes at most (a few are what a user records; the laws use the largest four).
constexpr size_t kMaxProbes = 32;

// "path@12" -> (path, 12); throws std::invalid_argument naming the text when the batch is missing or bad.
std::pair<std::string, uint64_t> parse_probe_arg(const std::string& text);

enum class SizeLaw : uint8_t { Constant, Linear, Quadratic, Irregular, Unmatched };
const char* size_law_name(SizeLaw law);

// Every reference allocation's size law, and how well the probes aligned.
class BatchModel {
 public:
  // `probes` of one program at distinct batches (at least two). Throws std::invalid_argument when the
  // probes cannot make a model (fewer than two, a repeated batch).
  explicit BatchModel(std::vector<BatchProbe> probes);

  // The reference's history at `batch`: replay events (and free requests) only, sizes modelled,
  // settings, segments and the initial state cleared (allocator_settings kept in `recorded_settings`).
  Trace at(uint64_t batch) const;
  // One allocation's modelled size at `batch` (by its ordinal among the reference's allocations).
  uint64_t size_at(size_t alloc, uint64_t batch) const;
  // Peak live requested bytes of the trace at `batch` (the bound no setting beats), in one pass.
  uint64_t live_peak_at(uint64_t batch) const;

  const std::vector<BatchProbe>& probes() const { return probes_; }
  const BatchProbe& reference() const { return probes_[ref_]; }
  size_t reference_index() const { return ref_; }
  // The reference's PYTORCH_CUDA_ALLOC_CONF ("" for the defaults).
  const std::string& recorded_conf() const { return recorded_conf_; }

  struct Alignment {
    bool exact = true;                     // every probe made the same events in the same order
    uint64_t reference_allocs = 0;         // allocations of the reference
    uint64_t unmatched_allocs = 0;         // of the reference, in some probe without a counterpart
    uint64_t unmatched_bytes = 0;          // their bytes in the reference
    uint64_t others_unmatched_allocs = 0;  // allocations of other probes left out
    uint64_t shrinking_allocs = 0;         // smaller at a larger batch: a batch given wrong, or another program
    std::vector<std::string> notes;        // what was assumed, for people
  };
  const Alignment& alignment() const { return alignment_; }
  // Allocations by law.
  std::vector<uint64_t> law_counts() const;
  SizeLaw law(size_t alloc) const { return laws_[alloc]; }
  uint64_t alloc_event(size_t alloc) const { return alloc_events_[alloc]; }
  // The allocations a program survives failing, by their index in at()'s events: cuDNN's workspaces
  // (PyTorch's convolutions catch the OOM of a workspace and try the next algorithm, aten/src/ATen/native/
  // cudnn/Conv_v8.cpp): scratch freed straight after its kernel, under a convolution's stack (or none, in a
  // backward of a program that convolves).
  const std::vector<bool>& optional_events() const { return optional_events_; }
  // The reference's event behind at()'s event `index` (at() keeps the replay events and free requests).
  const Event& reference_event(uint64_t index) const { return reference().trace.events[kept_[index]]; }
  size_t allocs() const { return laws_.size(); }

 private:
  void align();
  void fit_laws();
  void find_optional();
  size_t points_for(size_t alloc, uint64_t* batches, uint64_t* sizes) const;

  std::vector<BatchProbe> probes_;
  size_t ref_ = 0;
  std::string recorded_conf_;
  std::vector<uint64_t> alloc_events_;        // reference alloc ordinal -> its event index
  std::vector<std::vector<uint64_t>> sizes_;  // [probe][reference alloc ordinal] (UINT64_MAX: unmatched)
  std::vector<SizeLaw> laws_;
  std::vector<bool> optional_events_;
  std::vector<uint64_t> kept_;  // at()'s events by the reference's event index
  Alignment alignment_;
};

struct FitOptions {
  uint64_t capacity = 0;              // bytes (set_per_process_memory_fraction x total memory)
  std::vector<std::string> settings;  // PYTORCH_CUDA_ALLOC_CONF values to answer for besides the standard ones
  bool search_best = true;            // also tune's best setting at the first batch the defaults fail
  std::vector<uint64_t> batches;      // batches whose predicted peak to report as well
  uint64_t max_batch = 1u << 20;
  unsigned jobs = 0;  // threads; 0 = every core
};

struct BatchPoint {
  uint64_t batch = 0;
  bool fits = false;
  uint64_t peak_reserved = 0, peak_allocated = 0, live_peak = 0;
  uint64_t fail_event = 0, fail_request = 0;  // the first request not served (when !fits)
  std::string fail_site;                      // its line in the user's code (or size class)
  uint64_t skipped_workspaces = 0;            // cuDNN workspaces not served (survived: another algorithm ran)
};

struct SettingAnswer {
  std::string conf;            // "" = every default
  std::string label;           // "default", "recorded", "expandable segments", "tune's best", "given"
  uint64_t largest_batch = 0;  // 0: not even batch 1 fits
  std::optional<uint64_t> first_failing;
  std::vector<BatchPoint> points;  // by batch
};

struct GrowthGroup {
  std::string key;             // call site, or size class without stacks
  uint64_t bytes = 0;          // requested bytes live at the live peak, at `batch`
  int64_t per_batch_item = 0;  // how much they grow per unit of batch
  uint64_t allocs = 0;
};

struct ModelCheck {
  std::string what;  // "probe b=4 replayed", "held out b=8"
  uint64_t batch = 0;
  uint64_t recorded_peak = 0, predicted_peak = 0;
  double error() const {
    return recorded_peak ? (static_cast<double>(predicted_peak) - static_cast<double>(recorded_peak)) /
                               static_cast<double>(recorded_peak)
                         : 0.0;
  }
};

struct FitReport {
  uint64_t capacity = 0;
  uint64_t live_limit_batch = 0;  // the largest batch whose live bytes fit the capacity
  std::vector<SettingAnswer> answers;
  std::vector<GrowthGroup> growth;  // at the largest batch fitting the first answer (or the reference's)
  uint64_t growth_batch = 0;
  bool growth_by_site = false;
  std::vector<ModelCheck> checks;
  std::string confidence;  // one sentence for people
  double seconds = 0;
};

FitReport fit_batch(const BatchModel& model, const FitOptions& options);

}  // namespace fraglab
