#include "gui/app_state.h"

#include <algorithm>
#include <charconv>

#include "allocators/registry.h"
#include "gui/model/recorded_run.h"
#include "import/trace_import.h"
#include "traces/formats/pytorch/pool_inference.h"

namespace fraglab::gui {

AppState::AppState(std::function<void()> notify, RecentFiles recent_files)
    : recent(std::move(recent_files)), notify_(std::move(notify)) {}

AppState::~AppState() {
  // Workers join before the traces they read go away.
  pair.reset();
  other_run.reset();
  runs.clear();
}

namespace {

// A trace read on a loader thread: the model, or the reader's message (FormatError and the like).
std::pair<std::shared_ptr<const TraceInfo>, std::string> read_trace_info(const std::string& path, int device,
                                                                         bool defer_pool_check = false) {
  try {
    return {load_trace_info(path, defer_pool_check, device), ""};
  } catch (const std::exception& e) {
    return {nullptr, e.what()};
  }
}

}  // namespace

void AppState::open(const std::string& path) {
  if (loader_.joinable()) {
    loader_.request_stop();
    loader_.join();
  }
  loading_ = true;
  loading_path_ = path;
  load_finished_ = false;
  reopen_at_ = pending_at;
  loader_ = std::jthread([this, path](std::stop_token stop) {
    // The PyTorch model's check of a snapshot's inferred pools (traces/formats/pytorch/pool_inference.h) replays
    // the whole trace: it runs after the trace is shown, here, while the views' workers start.
    auto [info, error] = read_trace_info(path, trace_device, true);
    if (stop.stop_requested()) return;
    std::shared_ptr<const TraceInfo> unchecked = info && info->pools_pending ? info : nullptr;
    publish_load(std::move(info), std::move(error), false, unchecked != nullptr);
    if (!unchecked) return;
    bool confirmed = pools_confirmed(unchecked->trace);
    unchecked.reset();
    if (confirmed) {
      pool_check_running_ = false;
      if (notify_) notify_();
      return;
    }
    // The model revises the rules' pools (rare: private pools the rules missed): read it again, checked.
    auto [revised, revised_error] = read_trace_info(path, trace_device);
    if (stop.stop_requested()) return;
    publish_load(std::move(revised), std::move(revised_error), true, false);
  });
}

void AppState::publish_load(std::shared_ptr<const TraceInfo> info, std::string error, bool revision, bool check) {
  {
    std::lock_guard lock(load_mutex_);
    pool_check_running_ = check;
    loaded_ = std::move(info);
    loaded_error_ = std::move(error);
    loaded_revision_ = revision;
    load_finished_ = true;
  }
  loading_ = false;
  if (notify_) notify_();
}

void AppState::open_second(const std::string& path) {
  if (other_loader_.joinable()) {
    other_loader_.request_stop();
    other_loader_.join();
  }
  second_path = path;
  other_loader_ = std::jthread([this, path](std::stop_token stop) {
    auto [info, error] = read_trace_info(path, trace_device);
    if (stop.stop_requested()) return;
    {
      std::lock_guard lock(load_mutex_);
      other_loaded_ = std::move(info);
      other_loaded_error_ = std::move(error);
      other_finished_ = true;
    }
    if (notify_) notify_();
  });
}

void AppState::start_pair() {
  other_run.reset();
  pair.reset();
  if (!trace || !other || !primary_run()) return;
  const std::string& spec = primary_run()->spec();
  other_run = std::make_unique<PolicyRun>(other, spec, device_for(*other), notify_);
  // The diff replays both under one policy; the recorded lane is no policy, PyTorch's model stands in.
  pair = std::make_unique<TracePairRun>(trace, other, is_recorded_spec(spec) ? "pytorch" : spec, notify_);
}

void AppState::poll() {
  {
    std::unique_lock lock(load_mutex_);
    if (other_finished_) {
      other_finished_ = false;
      other = std::move(other_loaded_);
      other_error = std::move(other_loaded_error_);
      lock.unlock();
      start_pair();
    }
  }
  if (other && primary_run() && (!other_run || other_run->spec() != primary_run()->spec())) start_pair();
  std::shared_ptr<const TraceInfo> info;
  {
    std::lock_guard lock(load_mutex_);
    if (!load_finished_) {
      apply_pending_at();
      return;
    }
    load_finished_ = false;
    info = std::move(loaded_);
    load_error = std::move(loaded_error_);
    if (loaded_revision_) pending_at = reopen_at_;  // the cursor goes where the command line put it
  }
  if (info) {
    recent.add(info->path);
    adopt(std::move(info));
  }
}

void AppState::adopt(std::shared_ptr<const TraceInfo> info) {
  runs.clear();
  strips.clear();
  diffs.clear();
  trace = std::move(info);
  load_error.clear();
  // A snapshot without history is one moment, its state: all of it is there at the last event (the
  // prologue places one live block an event), so the cursor starts there rather than at the first block.
  cursor = trace->trace.meta.history_absent && trace->events() ? trace->events() - 1 : 0;
  timeline.begin = timeline.end = 0;
  path_field = trace->path;
  place_recorded_lane();
  start_runs();
  prepare_view(view);  // the shown view's workers start with the replays
  start_pair();
  if (!events.query.empty()) search_events(events.query);
}

void AppState::place_recorded_lane() {
  if (!auto_recorded) return;
  bool wanted = trace->recorded_layout;
  auto it = std::find(policies.begin(), policies.end(), kRecordedSpec);
  if (wanted && it == policies.end()) {
    policies.insert(policies.begin(), kRecordedSpec);
    recorded_added_ = true;
  } else if (!wanted && it != policies.end() && recorded_added_) {
    policies.erase(it);
    recorded_added_ = false;
  }
}

void AppState::start_runs() {
  runs.clear();
  strips.clear();
  diffs.clear();
  memory.reset();
  memory_texture.raster.reset();
  oom.reset();
  if (!trace) return;
  for (const auto& spec : policies) {
    runs.push_back(std::make_unique<PolicyRun>(trace, spec, device_for(*trace), notify_));
    runs.back()->request_snapshot(cursor);
  }
  primary = std::min(primary, runs.empty() ? 0 : runs.size() - 1);
}

void AppState::add_policy(const std::string& spec) {
  if (spec.empty()) return;
  policies.push_back(spec);
  if (!trace) return;
  runs.push_back(std::make_unique<PolicyRun>(trace, spec, device_for(*trace), notify_));
  runs.back()->request_snapshot(cursor);
}

void AppState::remove_policy(size_t index) {
  if (index >= policies.size()) return;
  policies.erase(policies.begin() + static_cast<ptrdiff_t>(index));
  if (index < runs.size()) {
    const PolicyRun* gone = runs[index].get();
    for (auto it = strips.begin(); it != strips.end();) it = it->first.first == gone ? strips.erase(it) : std::next(it);
    for (auto it = diffs.begin(); it != diffs.end();)
      it = it->first.first == gone || it->first.second == gone ? diffs.erase(it) : std::next(it);
    runs.erase(runs.begin() + static_cast<ptrdiff_t>(index));
  }
  if (primary >= runs.size()) primary = runs.empty() ? 0 : runs.size() - 1;
}

void AppState::set_cursor(uint64_t event_index) {
  if (!trace || trace->events() == 0) return;
  cursor = std::min(event_index, trace->events() - 1);
  for (auto& run : runs) run->request_snapshot(cursor);
}

void AppState::jump_to_peak() {
  // Without history the reserved bytes are all there from the first event; the snapshot's moment is the last.
  if (trace && trace->trace.meta.history_absent) return set_cursor(trace->events());
  if (const RunResult* r = primary_result()) set_cursor(r->replay.reserved.event_index);
}

void AppState::jump_to_oom(int direction) {
  const RunResult* r = primary_result();
  if (!r) return;
  const auto& ooms = r->replay.ooms;
  if (direction > 0) {
    auto it = std::upper_bound(ooms.begin(), ooms.end(), cursor,
                               [](uint64_t c, const OomRecord& o) { return c < o.event_index; });
    if (it != ooms.end()) set_cursor(it->event_index);
  } else {
    auto it = std::lower_bound(ooms.begin(), ooms.end(), cursor,
                               [](const OomRecord& o, uint64_t c) { return o.event_index < c; });
    if (it != ooms.begin()) set_cursor(std::prev(it)->event_index);
  }
}

void AppState::jump_to_device_grow(int direction) {
  const RunResult* r = primary_result();
  if (!r) return;
  const auto& grows = r->device_grows;
  if (direction > 0) {
    auto it = std::upper_bound(grows.begin(), grows.end(), cursor);
    if (it != grows.end()) set_cursor(*it);
  } else {
    auto it = std::lower_bound(grows.begin(), grows.end(), cursor);
    if (it != grows.begin()) set_cursor(*std::prev(it));
  }
}

void AppState::apply_pending_at() {
  if (pending_at.empty() || !trace) return;
  if (pending_at == "peak" || pending_at == "oom") {
    if (!primary_result()) return;
    if (pending_at == "peak" || primary_result()->replay.ooms.empty()) {
      jump_to_peak();  // --at oom on a run without one: its peak, as `fraglab info --at oom` reads it
    } else {
      set_cursor(0);
      jump_to_oom(+1);  // the first OOM
    }
  } else {
    uint64_t index = 0;
    auto [end, ec] = std::from_chars(pending_at.data(), pending_at.data() + pending_at.size(), index);
    if (ec == std::errc()) set_cursor(index);
  }
  pending_at.clear();
}

ActiveMemoryRun& AppState::memory_run() {
  if (!memory) memory = std::make_unique<ActiveMemoryRun>(trace, notify_);
  return *memory;
}

OomDiagnosisRun& AppState::oom_run() {
  if (!oom) oom = std::make_unique<OomDiagnosisRun>(trace, device.capacity, notify_, probes);
  return *oom;
}

void AppState::prepare_view(ViewId v) {
  if (!trace) return;
  if (v == ViewId::Memory) memory_run();
  if (v == ViewId::Oom) oom_run();
}

void AppState::search_events(const std::string& query) {
  events.query = query;
  events.error.clear();
  events.matches.clear();
  events.searched = false;
  if (!trace || query.empty()) return;
  try {
    events.matches = find_events(*trace, parse_event_query(query));
    events.searched = true;
  } catch (const std::exception& e) {
    events.error = e.what();
  }
}

void AppState::step_match(int direction) {
  const auto& m = events.matches;
  if (direction > 0) {
    auto it = std::upper_bound(m.begin(), m.end(), cursor);
    if (it != m.end()) set_cursor(*it);
  } else {
    auto it = std::lower_bound(m.begin(), m.end(), cursor);
    if (it != m.begin()) set_cursor(*std::prev(it));
  }
}

bool AppState::settled() const {
  if (loading() || pool_check_running_ || !trace || !pending_at.empty()) return false;
  if (view == ViewId::Memory && (!memory || !memory->settled() || memory_texture.raster != memory->raster()))
    return false;
  if (view == ViewId::Oom && (!oom || !oom->settled())) return false;
  if (ranks && !ranks->settled()) return false;
  if (!second_path.empty()) {
    if (!other && other_error.empty()) return false;
    if (other_run && other_run->state() == PolicyRun::State::Running) return false;
    if (view == ViewId::Compare && pair && !pair->settled()) return false;
  }
  for (const auto& run : runs) {
    if (run->state() == PolicyRun::State::Running) return false;
    if (!run->settled_at(cursor)) return false;
  }
  return true;
}

}  // namespace fraglab::gui
