#include "report/program_attribution.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "report/alloc_groups.h"
#include "traces/alloc_site.h"
#include "traces/units.h"

namespace fraglab {

const char* category_name(MemoryCategory c) {
  static const char* const names[] = {"parameters",
                                      "gradients",
                                      "optimizer state",
                                      "activations",
                                      "temporaries",
                                      "caches and buffers",
                                      "live before recording began"};
  return names[static_cast<int>(c)];
}

const char* phase_name(ProgramPhase p) {
  static const char* const names[] = {"setup", "forward", "backward", "optimizer", "inference", "before recording"};
  return names[static_cast<int>(p)];
}

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool any_frame(const std::vector<StackFrame>& frames, bool (*pred)(const StackFrame&)) {
  return std::any_of(frames.begin(), frames.end(), pred);
}

bool optimizer_frame(const StackFrame& f) { return contains(f.filename, "torch/optim/"); }
bool backward_frame(const StackFrame& f) {
  return contains(f.filename, "torch/autograd/") || (contains(f.filename, "torch/_tensor.py") && f.name == "backward");
}
bool setup_frame(const StackFrame& f) {
  if (contains(f.filename, "torch/nn/init.py") || contains(f.filename, "torch/nn/parameter.py")) return true;
  if (!contains(f.filename, "torch/nn/modules/module.py")) return false;
  return f.name == "_apply" || f.name == "to" || f.name == "cuda" || f.name == "load_state_dict" ||
         f.name == "_load_from_state_dict" || f.name == "to_empty" || f.name == "register_buffer";
}

// Hysteresis over the live bytes: a step rises to a peak and falls back by more than a quarter of the trace's
// range (or `hysteresis` bytes) before the next one starts (one pass; `live` is the requested bytes after each
// event).
void rises_and_falls(const std::vector<uint64_t>& live, std::vector<uint64_t>& starts, std::vector<uint64_t>& peaks,
                     uint64_t hysteresis = 0) {
  starts.assign(1, 0);
  peaks.clear();
  if (live.empty()) return;
  uint64_t lo = *std::min_element(live.begin(), live.end()), hi = *std::max_element(live.begin(), live.end());
  uint64_t h = hysteresis ? hysteresis : std::max<uint64_t>((hi - lo) / 4, 1);
  bool rising = true;
  uint64_t top = live[0], top_at = 0, bottom = live[0], bottom_at = 0;
  for (uint64_t i = 0; i < live.size(); ++i) {
    uint64_t v = live[i];
    if (rising) {
      if (v >= top)
        top = v, top_at = i;
      else if (top - v > h) {
        peaks.push_back(top_at);
        rising = false;
        bottom = v, bottom_at = i;
      }
    } else {
      if (v <= bottom)
        bottom = v, bottom_at = i;
      else if (v - bottom > h) {
        starts.push_back(bottom_at + 1);
        rising = true;
        top = v, top_at = i;
      }
    }
  }
  if (peaks.size() < starts.size()) peaks.push_back(top_at);
}

}  // namespace

std::vector<uint64_t> steps_from_live_bytes(const std::vector<uint64_t>& live, uint64_t hysteresis) {
  std::vector<uint64_t> starts, peaks;
  rises_and_falls(live, starts, peaks, hysteresis);
  return starts;
}

ProgramAttribution::ProgramAttribution(const Trace& trace) : trace_(trace) {
  const auto& stacks = trace.meta.stacks;
  prologue_ = trace.meta.initial.live_blocks;
  for (const auto& s : stacks) {
    has_stacks_ = has_stacks_ || !s.empty();
    has_backward_ = has_backward_ || any_frame(s, backward_frame);
  }
  phase_of_stack_.resize(stacks.size(), ProgramPhase::Forward);
  site_of_stack_.resize(stacks.size());
  via_of_stack_.resize(stacks.size());
  for (size_t k = 0; k < stacks.size(); ++k) {
    const auto& s = stacks[k];
    phase_of_stack_[k] = s.empty() ? (has_backward_ ? ProgramPhase::Backward : ProgramPhase::Inference)
                         : any_frame(s, optimizer_frame) ? ProgramPhase::Optimizer
                         : any_frame(s, backward_frame)  ? ProgramPhase::Backward
                         : any_frame(s, setup_frame)     ? ProgramPhase::Setup
                         : has_backward_                 ? ProgramPhase::Forward
                                                         : ProgramPhase::Inference;
    if (s.empty()) {
      site_of_stack_[k] = has_backward_ ? "(no Python frames: autograd's backward)" : "(no Python frames)";
    } else {
      site_of_stack_[k] = user_site_label(s);
      std::string via = site_label(s);
      if (via != site_of_stack_[k]) via_of_stack_[k] = via;
    }
  }
  // Allocations and their frees.
  std::vector<size_t> ordinal_of_id;
  std::vector<uint64_t> live_after(trace.events.size());
  uint64_t live = 0;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.kind == EventKind::Alloc) {
      if (e.id >= ordinal_of_id.size()) ordinal_of_id.resize(e.id + 1, SIZE_MAX);
      ordinal_of_id[e.id] = allocs_.size();
      allocs_.push_back({i, UINT64_MAX, e.size, e.stack, MemoryCategory::Temporary, ProgramPhase::Forward});
      live += e.size;
    } else if (e.kind == EventKind::Free && e.id < ordinal_of_id.size() && ordinal_of_id[e.id] != SIZE_MAX) {
      Alloc& a = allocs_[ordinal_of_id[e.id]];
      a.free_event = i;
      live -= a.size;
      ordinal_of_id[e.id] = SIZE_MAX;
    }
    live_after[i] = live;
  }
  rises_and_falls(live_after, step_starts_, step_peaks_);
  bool marked = steps_from_annotations();
  if (has_stacks_ && has_backward_ && !marked) find_steps();
  // Each step's live peak: what forward memory is still live there is what the step holds (activations).
  step_peaks_.assign(step_starts_.size(), 0);
  for (size_t s = 0; s < step_starts_.size(); ++s) {
    uint64_t end = s + 1 < step_starts_.size() ? step_starts_[s + 1] : live_after.size();
    uint64_t best = step_starts_[s];
    for (uint64_t i = step_starts_[s]; i < end; ++i)
      if (live_after[i] > live_after[best]) best = i;
    step_peaks_[s] = best;
  }
  inferred_from_ = has_stacks_ ? "call stacks and lifetimes" : "lifetimes alone (no stacks recorded)";
  if (marked) inferred_from_ += ", steps from the snapshot's annotations";
  classify();
}

// The snapshot's markers (TraceMeta::annotations): each ProfilerStep#N range starts a step; without them, each
// Optimizer.step range ends one. Events inside an Optimizer.step range are the optimizer's. False when the
// trace has no such markers (or no times to place them by).
bool ProgramAttribution::steps_from_annotations() {
  const auto& events = trace_.events;
  if (!trace_.meta.has_times || trace_.meta.annotations.empty() || events.empty()) return false;
  // The first event at or after a time (events are in time order, as the recording wrote them).
  auto first_at = [&](int64_t t) {
    return static_cast<uint64_t>(
        std::partition_point(events.begin(), events.end(), [t](const Event& e) { return e.time_us < t; }) -
        events.begin());
  };
  std::vector<uint64_t> profiler_starts, optimizer_ends;
  int64_t open_optimizer = INT64_MIN;
  for (const Annotation& a : trace_.meta.annotations) {
    // A mark (a history's `annotate` entry) named for a step starts one as its range's START does.
    if (a.name.rfind("ProfilerStep#", 0) == 0 && (a.start || a.mark)) profiler_starts.push_back(first_at(a.time_us));
    if (a.mark || a.name.rfind("Optimizer.step", 0) != 0) continue;
    if (a.start) {
      open_optimizer = a.time_us;
    } else if (open_optimizer != INT64_MIN) {
      uint64_t first = first_at(open_optimizer), end = first_at(a.time_us + 1);
      optimizer_windows_.emplace_back(first, end);
      optimizer_ends.push_back(end);
      open_optimizer = INT64_MIN;
    }
  }
  std::vector<uint64_t> starts{0};
  for (uint64_t s : profiler_starts.empty() ? optimizer_ends : profiler_starts)
    if (s > starts.back() && s < events.size()) starts.push_back(s);
  if (starts.size() < 2 && optimizer_windows_.empty()) return false;
  if (starts.size() >= 2) step_starts_ = starts;
  return starts.size() >= 2;
}

// With stacks: a step begins at the first forward allocation after a backward or optimizer one.
void ProgramAttribution::find_steps() {
  std::vector<uint64_t> starts{0};
  ProgramPhase last = ProgramPhase::Setup;
  for (const Alloc& a : allocs_) {
    if (a.event < prologue_) continue;
    ProgramPhase p = phase_of_stack_[a.stack < phase_of_stack_.size() ? a.stack : 0];
    if (p == ProgramPhase::Forward && (last == ProgramPhase::Backward || last == ProgramPhase::Optimizer))
      starts.push_back(a.event);
    if (p != ProgramPhase::Setup) last = p;
  }
  step_starts_ = starts;
}

uint32_t ProgramAttribution::step_of(uint64_t event_index) const {
  auto it = std::upper_bound(step_starts_.begin(), step_starts_.end(), event_index);
  return static_cast<uint32_t>(it - step_starts_.begin());
}

ProgramPhase ProgramAttribution::stack_phase(StackId stack) const {
  return phase_of_stack_[stack < phase_of_stack_.size() ? stack : 0];
}

ProgramPhase ProgramAttribution::phase_of_event(uint64_t event_index) const {
  if (event_index < prologue_) return ProgramPhase::BeforeRecording;
  if (has_stacks_) {  // the phase of the latest allocation at or before it
    auto it = std::upper_bound(allocs_.begin(), allocs_.end(), event_index,
                               [](uint64_t i, const Alloc& a) { return i < a.event; });
    return it == allocs_.begin() ? ProgramPhase::Setup : std::prev(it)->phase;
  }
  for (const auto& [first, end] : optimizer_windows_)
    if (event_index >= first && event_index < end) return ProgramPhase::Optimizer;
  uint32_t s = step_of(event_index);
  return s && s <= step_peaks_.size() && event_index > step_peaks_[s - 1] ? ProgramPhase::Backward
                                                                          : ProgramPhase::Forward;
}

void ProgramAttribution::classify() {
  // Alive into the last step: the model and what lives as long (a program may free it all before its snapshot).
  auto lives_to_end = [&](const Alloc& a) {
    return a.free_event == UINT64_MAX || (step_starts_.size() > 1 && a.free_event >= step_starts_.back());
  };
  // Setup ends where the first allocation that is freed again was made: what came before and lives on is the
  // model (parameters, buffers), whatever the stacks say.
  uint64_t setup_end = UINT64_MAX;
  for (const Alloc& a : allocs_)
    if (a.event >= prologue_ && a.free_event != UINT64_MAX) {
      setup_end = a.event;
      break;
    }
  for (Alloc& a : allocs_) {
    if (a.event < prologue_) {
      a.phase = ProgramPhase::BeforeRecording;
      a.category = MemoryCategory::BeforeRecording;
      continue;
    }
    if (has_stacks_)
      a.phase = stack_phase(a.stack);
    else  // the model is what lives to the last step (or for ever) and was made before the first step's peak
      a.phase = a.event < setup_end || (lives_to_end(a) && a.event < step_peaks_[0]) ? ProgramPhase::Setup
                                                                                     : phase_of_event(a.event);
    if (!has_stacks_ && a.event < setup_end && a.free_event == UINT64_MAX && a.phase != ProgramPhase::Optimizer)
      a.phase = ProgramPhase::Setup;
  }
  for (Alloc& a : allocs_) {
    if (a.phase == ProgramPhase::BeforeRecording) continue;
    uint32_t step = step_of(a.event);
    uint64_t step_end = step < step_starts_.size() ? step_starts_[step] : UINT64_MAX;
    bool forever = a.free_event == UINT64_MAX;
    bool past_step = forever || a.free_event >= step_end;
    ProgramPhase freed_in = forever ? ProgramPhase::Setup : phase_of_event(a.free_event);
    switch (a.phase) {
      case ProgramPhase::Setup:
        a.category = past_step ? MemoryCategory::Parameter : MemoryCategory::Temporary;
        break;
      case ProgramPhase::Optimizer:
        a.category = past_step ? MemoryCategory::OptimizerState : MemoryCategory::Temporary;
        break;
      case ProgramPhase::Backward:
        a.category = !has_stacks_ && forever                           ? MemoryCategory::OptimizerState
                     : past_step || freed_in != ProgramPhase::Backward ? MemoryCategory::Gradient
                                                                       : MemoryCategory::Temporary;
        break;
      default:  // forward, inference: still live at its step's live peak, it is what the step holds; still live
                // at the end of the last step (an OOM, an exception keeping a cell's frame), likewise
        a.category = forever && step == step_starts_.size() ? MemoryCategory::Activation
                     : past_step                            ? MemoryCategory::Cache
                     : freed_in == ProgramPhase::Backward || a.free_event > step_peaks_[step ? step - 1 : 0]
                         ? MemoryCategory::Activation
                         : MemoryCategory::Temporary;
    }
  }
}

MemoryCategory ProgramAttribution::category_of(uint64_t alloc_event) const {
  auto it = std::lower_bound(allocs_.begin(), allocs_.end(), alloc_event,
                             [](const Alloc& a, uint64_t i) { return a.event < i; });
  return it != allocs_.end() && it->event == alloc_event ? it->category : MemoryCategory::Temporary;
}

std::string ProgramAttribution::site_of(const Event& e) const {
  if (!has_stacks_) return size_class_label(e.size);
  return e.stack < site_of_stack_.size() ? site_of_stack_[e.stack] : "(no stack recorded)";
}

std::vector<StackFrame> ProgramAttribution::stack_of(const Event& e) const {
  return e.stack < trace_.meta.stacks.size() ? trace_.meta.stacks[e.stack] : std::vector<StackFrame>{};
}

namespace {

struct Group {
  LiveShare share;
  std::map<std::string, uint64_t> via, categories;
  uint64_t largest_event = UINT64_MAX;
};

std::vector<LiveShare> sorted(std::map<std::string, Group>& groups) {
  std::vector<LiveShare> out;
  for (auto& [key, g] : groups) {
    g.share.key = key;
    std::vector<std::pair<std::string, uint64_t>> via(g.via.begin(), g.via.end());
    std::sort(via.begin(), via.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (size_t k = 0; k < via.size() && k < 3; ++k)
      g.share.detail += fmt::format("{}{} ({})", k ? ", " : "via ", via[k].first, format_size(via[k].second));
    g.share.categories.assign(g.categories.begin(), g.categories.end());
    std::sort(g.share.categories.begin(), g.share.categories.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
    out.push_back(std::move(g.share));
  }
  std::sort(out.begin(), out.end(), [](const LiveShare& a, const LiveShare& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.key < b.key;
  });
  return out;
}

}  // namespace

LiveAttribution ProgramAttribution::live_before(uint64_t event_index) const {
  LiveAttribution out;
  out.event_index = event_index;
  out.by_stacks = has_stacks_;
  out.inferred_from = inferred_from_;
  std::map<std::string, Group> sites, categories, phases;
  for (const Alloc& a : allocs_) {
    if (a.event >= event_index) break;
    if (a.free_event < event_index) continue;
    out.live_bytes += a.size;
    ++out.live_count;
    const Event& e = trace_.events[a.event];
    std::string phase = a.phase == ProgramPhase::BeforeRecording || a.phase == ProgramPhase::Setup
                            ? phase_name(a.phase)
                            : fmt::format("step {} {}", step_of(a.event), phase_name(a.phase));
    auto add = [&](Group& g, bool keep_stack) {
      g.share.bytes += a.size;
      ++g.share.count;
      if (a.size > g.share.largest) {
        g.share.largest = a.size;
        if (keep_stack) g.share.stack = stack_of(e);
      }
      g.categories[category_name(a.category)] += a.size;
    };
    Group& site = sites[site_of(e)];
    add(site, true);
    if (has_stacks_ && e.stack < via_of_stack_.size() && !via_of_stack_[e.stack].empty())
      site.via[via_of_stack_[e.stack]] += a.size;
    add(categories[category_name(a.category)], false);
    add(phases[phase], false);
  }
  out.by_site = sorted(sites);
  out.by_category = sorted(categories);
  out.by_phase = sorted(phases);
  for (auto& c : out.by_category) c.categories.clear();
  return out;
}

}  // namespace fraglab
