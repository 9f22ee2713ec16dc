// Who holds the memory, in the program's terms: every allocation of a trace given a category
// (parameters, gradients, optimizer state, activations saved for backward, temporaries, caches), the
// phase and the step it was made in, and the line of the user's own code that asked for it.
//
// Categories follow PyTorch's memory profiler (torch/profiler/_memory_profiler.py: PARAMETER,
// OPTIMIZER_STATE, GRADIENT, ACTIVATION, TEMPORARY, ...), which reads them from the autograd graph. A
// snapshot has no graph, so they are inferred, as Mosaic does, from the allocation's stack and lifetime:
//  - the phase: a stack inside torch/optim is the optimizer; a stack inside torch/autograd, or no Python
//    frame at all in a trace that records them (autograd's engine runs backward on its own thread), is
//    backward; a stack inside Module._apply/to/load_state_dict or nn.init is setup; other allocations
//    are forward (or inference, where the trace has no backward at all);
//  - the snapshot's own markers where it has them (external_annotations: ProfilerStep#N ranges start steps,
//    Optimizer.step ranges are the optimizer, and end a step);
//  - otherwise, without stacks, steps are found from the live bytes (each step rises to a peak at the end
//    of its forward and falls through backward), and the phase is the side of its step's peak;
//  - the category from phase and lifetime: setup memory that lives on is parameters; forward memory
//    freed in a backward is an activation saved for it, freed in its own phase a temporary, living past
//    its step a cache (a KV cache, a buffer); backward memory living past its backward is a gradient;
//    optimizer memory living past the step is optimizer state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

enum class MemoryCategory : uint8_t {
  Parameter,
  Gradient,
  OptimizerState,
  Activation,
  Temporary,
  Cache,
  BeforeRecording,  // live when the history began: its allocation was not recorded
};
constexpr int kMemoryCategories = 7;
const char* category_name(MemoryCategory c);  // "parameters", "activations", ...

enum class ProgramPhase : uint8_t { Setup, Forward, Backward, Optimizer, Inference, BeforeRecording };
const char* phase_name(ProgramPhase p);

// Bytes under one key at one moment.
struct LiveShare {
  std::string key;
  uint64_t bytes = 0, count = 0, largest = 0;
  std::string
      detail;  // by site: the library lines under it ("via modeling_gpt2.py:697 ..."); by category: its phase mix
  std::vector<StackFrame> stack;                             // by site: the full stack of its largest block
  std::vector<std::pair<std::string, uint64_t>> categories;  // by site: its bytes by category
};

struct LiveAttribution {
  uint64_t event_index = 0;  // live just before this event
  uint64_t live_bytes = 0, live_count = 0;
  std::vector<LiveShare> by_site, by_category, by_phase;  // most bytes first
  bool by_stacks = false;                                 // sites are call sites (else size classes)
  std::string inferred_from;  // "call stacks and lifetimes" or "lifetimes alone (no stacks recorded)"
};

// Steps from live bytes alone (`live`: requested bytes after each event): each rises to a peak and falls
// back by more than `hysteresis` bytes before the next begins (0: a quarter of the series' range, as
// ProgramAttribution does without annotations or stacks). Step starts, ascending, the first 0.
std::vector<uint64_t> steps_from_live_bytes(const std::vector<uint64_t>& live, uint64_t hysteresis = 0);

class ProgramAttribution {
 public:
  explicit ProgramAttribution(const Trace& trace);

  // What was live just before `event_index` (requested bytes), grouped three ways.
  LiveAttribution live_before(uint64_t event_index) const;
  // The call site of one event with a stack (an alloc or an oom), as live_before's by_site names it.
  std::string site_of(const Event& e) const;
  std::vector<StackFrame> stack_of(const Event& e) const;
  // The category of the allocation made at `alloc_event` (an Alloc event's index).
  MemoryCategory category_of(uint64_t alloc_event) const;
  // The step (1-based; 0 before the first) and phase of an event.
  uint32_t step_of(uint64_t event_index) const;
  ProgramPhase phase_of_event(uint64_t event_index) const;
  uint32_t steps() const { return static_cast<uint32_t>(step_starts_.size()); }
  // Where each step begins (event indices, ascending, the first 0), found as step_of finds them.
  const std::vector<uint64_t>& step_starts() const { return step_starts_; }
  bool has_stacks() const { return has_stacks_; }
  const std::string& inferred_from() const { return inferred_from_; }

 private:
  struct Alloc {
    uint64_t event = 0, free_event = UINT64_MAX, size = 0;
    StackId stack = 0;
    MemoryCategory category = MemoryCategory::Temporary;
    ProgramPhase phase = ProgramPhase::Forward;
  };
  void find_steps();
  bool steps_from_annotations();
  void classify();
  ProgramPhase stack_phase(StackId stack) const;

  const Trace& trace_;
  std::vector<Alloc> allocs_;
  std::vector<uint64_t> step_starts_;  // event index where each step begins
  std::vector<uint64_t> step_peaks_;   // event index of each step's live peak
  std::vector<ProgramPhase> phase_of_stack_;
  std::vector<std::pair<uint64_t, uint64_t>> optimizer_windows_;  // [first, end) events inside Optimizer.step
  std::vector<std::string> site_of_stack_, via_of_stack_;
  bool has_stacks_ = false, has_backward_ = false;
  uint64_t prologue_ = 0;
  std::string inferred_from_;
};

}  // namespace fraglab
