#include "report/alloc_groups.h"

#include "report/program_attribution.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <bit>
#include <map>
#include <tuple>

#include "traces/alloc_site.h"

namespace fraglab {

namespace {

// 2^k as "512 B", "1 KiB", "64 MiB": exact, so interval labels read as the powers they are.
std::string power_label(int k) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  return fmt::format("{} {}", uint64_t{1} << (k % 10), units[k / 10]);
}

void sort_by_bytes(std::vector<AllocGroup>& groups) {
  std::sort(groups.begin(), groups.end(), [](const AllocGroup& a, const AllocGroup& b) {
    return std::tie(b.bytes, b.allocs, a.key) < std::tie(a.bytes, a.allocs, b.key);
  });
}

}  // namespace

std::string size_class_label(uint64_t bytes) {
  if (bytes == 0) return "[0 B, 1 B)";
  int k = std::bit_width(bytes) - 1;
  return "[" + power_label(k) + ", " + (k == 63 ? std::string("2^64 B") : power_label(k + 1)) + ")";
}

std::string stream_label(const TraceMeta& meta, StreamIndex stream) {
  uint64_t handle = stream < meta.streams.size() ? meta.streams[stream] : 0;
  return handle == 0 ? fmt::format("stream {} (default)", stream) : fmt::format("stream {} ({:#x})", stream, handle);
}

GroupLabels::GroupLabels(const TraceMeta& meta) : meta_(meta) {
  site_of_stack_.reserve(meta.stacks.size());
  for (const auto& frames : meta.stacks) {
    site_of_stack_.push_back(site_label(frames));
    has_stacks_ = has_stacks_ || !frames.empty();
  }
}

std::string GroupLabels::label(GroupBy by, const Event& alloc) const {
  switch (by) {
    case GroupBy::Site:
      return alloc.stack < site_of_stack_.size() ? site_of_stack_[alloc.stack] : site_label({});
    case GroupBy::SizeClass:
      return size_class_label(alloc.size);
    case GroupBy::Stream:
      return stream_label(meta_, alloc.stream);
    case GroupBy::Category:  // needs the whole trace's lifetimes: break_down labels it (ProgramAttribution)
      return {};
  }
  return {};
}

const std::vector<AllocGroup>& AllocBreakdown::of(GroupBy by) const {
  return by == GroupBy::Site        ? by_site
         : by == GroupBy::SizeClass ? by_size_class
         : by == GroupBy::Category  ? by_category
                                    : by_stream;
}

AllocBreakdown break_down(const Trace& trace, uint64_t peak_live_index) {
  constexpr GroupBy kAll[] = {GroupBy::Site, GroupBy::SizeClass, GroupBy::Stream, GroupBy::Category};
  constexpr int kGroupings = 4;
  GroupLabels labels(trace.meta);
  ProgramAttribution program(trace);
  std::map<std::string, AllocGroup> groups[kGroupings];
  // The groups each live allocation counts in, by id, so the live bytes at the peak can be
  // summed when the replay of allocs and frees reaches it.
  std::vector<std::array<AllocGroup*, kGroupings>> live_groups;
  std::vector<uint64_t> live_size;
  std::vector<bool> live;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.kind == EventKind::Alloc) {
      if (e.id >= live.size()) live_groups.resize(e.id + 1), live_size.resize(e.id + 1), live.resize(e.id + 1);
      for (int g = 0; g < kGroupings; ++g) {
        AllocGroup& group =
            groups[g][kAll[g] == GroupBy::Category ? category_name(program.category_of(i)) : labels.label(kAll[g], e)];
        ++group.allocs;
        group.bytes += e.size;
        live_groups[e.id][static_cast<size_t>(g)] = &group;
      }
      live_size[e.id] = e.size;
      live[e.id] = true;
    } else if (e.kind == EventKind::Free && e.id < live.size()) {
      live[e.id] = false;
    }
    if (i == peak_live_index)
      for (size_t id = 0; id < live.size(); ++id)
        if (live[id])
          for (AllocGroup* group : live_groups[id]) group->live_at_peak += live_size[id];
  }
  AllocBreakdown out;
  out.has_stacks = labels.has_stacks();
  std::vector<AllocGroup>* lists[kGroupings] = {&out.by_site, &out.by_size_class, &out.by_stream, &out.by_category};
  for (int g = 0; g < kGroupings; ++g) {
    for (auto& [key, group] : groups[g]) {
      group.key = key;
      lists[g]->push_back(group);
    }
    sort_by_bytes(*lists[g]);
  }
  return out;
}

}  // namespace fraglab
