#include "gui/model/trace_info.h"

#include "report/program_attribution.h"

#include <algorithm>
#include <future>
#include <numeric>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "gui/model/recorded_run.h"
#include "import/trace_import.h"
#include "sim/capacity.h"
#include "traces/alloc_site.h"
#include "traces/formats/pytorch/pool_inference.h"
#include "traces/trace_io.h"

namespace fraglab::gui {

namespace {

std::vector<uint64_t> match_frees(const Trace& trace) {
  std::vector<uint64_t> free_index(trace.events.size(), TraceInfo::kNever);
  std::vector<uint64_t> open;  // by allocation id: the index of the live alloc
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.kind == EventKind::Alloc) {
      if (e.id >= open.size()) open.resize(e.id + 1, TraceInfo::kNever);
      open[e.id] = i;
    } else if (e.kind == EventKind::Free && e.id < open.size() && open[e.id] != TraceInfo::kNever) {
      free_index[open[e.id]] = i;
      open[e.id] = TraceInfo::kNever;
    }
  }
  return free_index;
}

void assign_sites(TraceInfo& info) {
  const auto& stacks = info.trace.meta.stacks;
  std::unordered_map<std::string, uint32_t> by_label;
  std::vector<AllocSite> sites{{"(no stack recorded)", 0, 0, false}};
  std::vector<uint32_t> site_of_stack(stacks.size(), 0);
  for (size_t s = 1; s < stacks.size(); ++s) {
    if (stacks[s].empty()) continue;
    std::string label = fraglab::site_label(stacks[s]);
    auto [it, added] = by_label.emplace(label, static_cast<uint32_t>(sites.size()));
    if (added) sites.push_back({label, 0, 0, true});
    site_of_stack[s] = it->second;
  }
  for (const Event& e : info.trace.events) {
    if (e.kind != EventKind::Alloc) continue;
    AllocSite& site = sites[e.stack < site_of_stack.size() ? site_of_stack[e.stack] : 0];
    site.bytes += e.size;
    ++site.count;
  }
  // Order by bytes so colors and the summary's table go to the sites that matter.
  std::vector<uint32_t> order(sites.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return sites[a].bytes > sites[b].bytes; });
  std::vector<uint32_t> rank(sites.size());
  for (uint32_t r = 0; r < order.size(); ++r) rank[order[r]] = r;
  for (auto& s : site_of_stack) s = rank[s];
  info.sites.clear();
  for (uint32_t i : order) info.sites.push_back(sites[i]);
  info.no_stack_site = rank[0];
  info.site_of_stack = std::move(site_of_stack);
  info.has_stacks = stacks.size() > 1;
}

// Each allocation's category, from its stack and lifetime, and the program's steps (report/program_attribution.h).
std::pair<std::vector<uint8_t>, std::vector<uint64_t>> alloc_categories(const Trace& trace) {
  ProgramAttribution program(trace);
  std::vector<uint8_t> out(trace.events.size(), TraceInfo::kNoCategory);
  for (uint64_t i = 0; i < trace.events.size(); ++i)
    if (trace.events[i].kind == EventKind::Alloc) out[i] = static_cast<uint8_t>(program.category_of(i));
  return {std::move(out), program.step_starts()};
}

}  // namespace

int64_t TraceInfo::time_at(uint64_t index) const {
  if (trace.events.empty()) return 0;
  return trace.events[std::min<uint64_t>(index, trace.events.size() - 1)].time_us;
}

uint64_t TraceInfo::index_at_time(int64_t t) const {
  auto it = std::lower_bound(trace.events.begin(), trace.events.end(), t,
                             [](const Event& e, int64_t time) { return e.time_us < time; });
  return static_cast<uint64_t>(it - trace.events.begin());
}

namespace {

std::shared_ptr<TraceInfo> derive(Trace trace, std::string path) {
  auto info = std::make_shared<TraceInfo>();
  info->path = std::move(path);
  info->trace = std::move(trace);
  // Independent passes over millions of events, each on a thread (2 cores: the statistics
  // beside the other two).
  auto frees = std::async(std::launch::async, [&t = info->trace] { return match_frees(t); });
  auto stats = std::async(std::launch::async, [&t = info->trace] {
    MemorySource source(t);
    return compute_stats(source);
  });
  auto categories = std::async(std::launch::async, [&t = info->trace] { return alloc_categories(t); });
  assign_sites(*info);
  info->inferred_capacity = capacity_for(info->trace, std::nullopt, &info->capacity_note);
  info->free_index = frees.get();
  info->stats = stats.get();
  std::tie(info->categories, info->steps) = categories.get();
  info->recorded_layout = has_recorded_layout(info->trace);
  for (uint64_t i = info->trace.events.size(); i > 0 && info->program_end == 0; --i)
    if (info->trace.events[i - 1].kind == EventKind::Alloc || info->trace.events[i - 1].kind == EventKind::Free)
      info->program_end = i;
  return info;
}

}  // namespace

std::shared_ptr<const TraceInfo> make_trace_info(Trace trace, std::string path) {
  return derive(std::move(trace), std::move(path));
}

std::shared_ptr<const TraceInfo> load_trace_info(const std::string& path, bool defer_pool_check, int device) {
  ReadOptions options;
  options.device = device;  // kAnyDevice by default: a DDP/FSDP rank's snapshot opens on its own GPU
  options.defer_pool_check = defer_pool_check;
  Trace trace = load_trace(path, options);
  bool pending = defer_pool_check && pool_check_pending(trace);
  auto info = derive(std::move(trace), path);
  info->pools_pending = pending;
  return info;
}

}  // namespace fraglab::gui
