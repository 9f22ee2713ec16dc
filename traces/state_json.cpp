#include "traces/state_json.h"

#include <limits>
#include <set>
#include <stdexcept>
#include <string>

namespace fraglab {

namespace {

using nlohmann::json;

uint64_t u64(const json& v, const char* what) {
  if (!v.is_number_unsigned()) throw std::out_of_range(std::string(what) + " must be a non-negative integer");
  return v.get<uint64_t>();
}

int64_t i64(const json& v, const char* what) {
  if (!v.is_number_integer()) throw std::out_of_range(std::string(what) + " must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw std::out_of_range(std::string(what) + " is out of range");
  return v.get<int64_t>();
}

uint64_t index_below(const json& v, size_t limit, const char* what) {
  uint64_t i = u64(v, what);
  if (i >= limit) throw std::out_of_range(std::string(what) + " " + std::to_string(i) + " is not in the trace's table");
  return i;
}

}  // namespace

json segments_to_json(const std::vector<RecordedSegment>& segments) {
  json out = json::array();
  for (const RecordedSegment& s : segments) {
    json blocks = json::array();
    for (const RecordedBlock& b : s.blocks)
      blocks.push_back({b.address, b.size, b.requested_size, static_cast<int>(b.state), b.stack});
    out.push_back({{"address", s.address},
                   {"total_size", s.total_size},
                   {"stream", s.stream},
                   {"small", s.small_pool},
                   {"expandable", s.is_expandable},
                   {"pool", {s.pool_id[0], s.pool_id[1]}},
                   {"blocks", std::move(blocks)}});
  }
  return out;
}

std::vector<RecordedSegment> segments_from_json(const json& j, size_t stream_count, size_t stack_count) {
  std::vector<RecordedSegment> out;
  for (const json& s : j) {
    RecordedSegment seg;
    seg.address = u64(s.at("address"), "a segment's address");
    seg.total_size = u64(s.at("total_size"), "a segment's size");
    seg.stream = static_cast<StreamIndex>(index_below(s.at("stream"), stream_count, "a segment's stream"));
    seg.small_pool = s.at("small").get<bool>();
    seg.is_expandable = s.at("expandable").get<bool>();
    seg.pool_id = {i64(s.at("pool").at(0), "a pool id"), i64(s.at("pool").at(1), "a pool id")};
    for (const json& b : s.at("blocks")) {
      RecordedBlock blk;
      blk.address = u64(b.at(0), "a block's address");
      blk.size = u64(b.at(1), "a block's size");
      blk.requested_size = u64(b.at(2), "a block's requested size");
      uint64_t state = u64(b.at(3), "a block's state");
      if (state > static_cast<uint64_t>(RecordedBlock::State::ActivePendingFree))
        throw std::out_of_range("a block's state is unknown");
      blk.state = static_cast<RecordedBlock::State>(state);
      blk.stack = static_cast<StackId>(index_below(b.at(4), stack_count, "a block's stack"));
      if (blk.state != RecordedBlock::State::Inactive) {
        seg.allocated_size += blk.size;
        seg.requested_size += blk.requested_size;
      }
      seg.blocks.push_back(blk);
    }
    seg.active_size = seg.allocated_size;
    out.push_back(std::move(seg));
  }
  return out;
}

json initial_to_json(const InitialState& st) {
  return {{"segments", segments_to_json(st.segments)},
          {"live_blocks", st.live_blocks},
          {"estimated_requests", st.estimated_requests},
          {"unplaced_frees", st.unplaced_frees}};
}

InitialState initial_from_json(const json& j, size_t stream_count, size_t stack_count) {
  InitialState st;
  st.segments = segments_from_json(j.at("segments"), stream_count, stack_count);
  st.live_blocks = u64(j.at("live_blocks"), "live_blocks");
  st.estimated_requests = u64(j.at("estimated_requests"), "estimated_requests");
  st.unplaced_frees = u64(j.at("unplaced_frees"), "unplaced_frees");
  uint64_t blocks = 0;
  for (const RecordedSegment& s : st.segments) blocks += s.blocks.size();
  if (blocks != st.live_blocks) throw std::out_of_range("live_blocks disagrees with the segments' blocks");
  return st;
}

nlohmann::json ranges_to_json(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [first, end] : ranges) out.push_back({first, end});
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> ranges_from_json(const nlohmann::json& j) {
  if (!j.is_array()) throw std::out_of_range("expandable_flipped must be a list of [first, end] ranges");
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& r : j) {
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_unsigned() || !r[1].is_number_unsigned())
      throw std::out_of_range("an expandable_flipped range must be [first, end] of non-negative integers");
    const uint64_t first = r[0].get<uint64_t>(), end = r[1].get<uint64_t>();
    if (first >= end || (!out.empty() && first < out.back().second))
      throw std::out_of_range("expandable_flipped ranges must be non-empty, ascending and disjoint");
    out.emplace_back(first, end);
  }
  return out;
}

// A pool is [a, b], or [a, b, ["allocator", "use_on_oom", "no_split", "empties_on_release"]] with what was
// inferred of its MemPool (PoolInfo).
nlohmann::json pools_to_json(const std::vector<PoolInfo>& pools) {
  nlohmann::json out = nlohmann::json::array();
  for (const PoolInfo& p : pools) {
    nlohmann::json entry = nlohmann::json::array({p.id[0], p.id[1]});
    nlohmann::json traits = nlohmann::json::array();
    if (p.own_allocator) traits.push_back("allocator");
    if (p.use_on_oom) traits.push_back("use_on_oom");
    if (p.no_split) traits.push_back("no_split");
    if (p.empties_on_release) traits.push_back("empties_on_release");
    if (!traits.empty()) entry.push_back(traits);
    out.push_back(entry);
  }
  return out;
}

std::vector<PoolInfo> pools_from_json(const nlohmann::json& j) {
  if (!j.is_array() || j.empty() || j.size() > UINT16_MAX + 1u)
    throw std::out_of_range("pools must be a list of 1 to 65536 [a, b] ids");
  std::vector<PoolInfo> pools;
  for (const auto& p : j) {
    if (!p.is_array() || (p.size() != 2 && p.size() != 3) || !p[0].is_number_integer() || !p[1].is_number_integer())
      throw std::out_of_range("a pool must be [a, b] of integers, or [a, b, [traits]]");
    PoolInfo info{{p[0].get<int64_t>(), p[1].get<int64_t>()}};
    if (p.size() == 3) {
      if (!p[2].is_array()) throw std::out_of_range("a pool's traits must be a list of names");
      for (const auto& t : p[2]) {
        const std::string name = t.is_string() ? t.get<std::string>() : "";
        if (name == "allocator")
          info.own_allocator = true;
        else if (name == "use_on_oom")
          info.use_on_oom = true;
        else if (name == "no_split")
          info.no_split = true;
        else if (name == "empties_on_release")
          info.empties_on_release = true;
        else
          throw std::out_of_range("a pool's trait must be allocator, use_on_oom, no_split or empties_on_release");
      }
    }
    pools.push_back(info);
  }
  if (pools[0].id != std::array<int64_t, 2>{0, 0})
    throw std::out_of_range("the first pool must be the default pools [0, 0]");
  return pools;
}

nlohmann::json annotations_to_json(const std::vector<Annotation>& annotations) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : annotations)
    out.push_back(nlohmann::json::array({a.time_us, a.mark ? "MARK" : a.start ? "START" : "END", a.name}));
  return out;
}

std::vector<Annotation> annotations_from_json(const nlohmann::json& j) {
  std::vector<Annotation> out;
  if (!j.is_array()) return out;
  for (const auto& item : j)
    if (item.is_array() && item.size() == 3 && item[0].is_number_integer() && item[1].is_string() &&
        item[2].is_string())
      out.push_back({item[0].get<int64_t>(), item[1].get<std::string>() == "START", item[2].get<std::string>(),
                     item[1].get<std::string>() == "MARK"});
  return out;
}

nlohmann::json skipped_actions_to_json(const std::vector<SkippedAction>& skipped) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : skipped) out.push_back(nlohmann::json::array({s.action, s.reading}));
  return out;
}

std::vector<SkippedAction> skipped_actions_from_json(const nlohmann::json& j) {
  std::vector<SkippedAction> out;
  if (!j.is_array()) return out;
  for (const auto& item : j)
    if (item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_string())
      out.push_back({item[0].get<std::string>(), item[1].get<std::string>()});
  return out;
}

nlohmann::json host_memory_to_json(const HostMemory& h) {
  return {{"segments", h.segments},
          {"reserved", h.reserved},
          {"allocated", h.allocated},
          {"trace_entries", h.trace_entries},
          {"allocs", h.allocs},
          {"frees", h.frees},
          {"segment_allocs", h.segment_allocs},
          {"segment_frees", h.segment_frees},
          {"peak_allocated", h.peak_allocated},
          {"peak_reserved", h.peak_reserved}};
}

HostMemory host_memory_from_json(const nlohmann::json& j) {
  HostMemory h;
  if (!j.is_object()) return h;
  auto get = [&](const char* key, uint64_t& to) {
    if (auto it = j.find(key); it != j.end() && it->is_number_unsigned()) to = it->get<uint64_t>();
  };
  get("segments", h.segments);
  get("reserved", h.reserved);
  get("allocated", h.allocated);
  get("trace_entries", h.trace_entries);
  get("allocs", h.allocs);
  get("frees", h.frees);
  get("segment_allocs", h.segment_allocs);
  get("segment_frees", h.segment_frees);
  get("peak_allocated", h.peak_allocated);
  get("peak_reserved", h.peak_reserved);
  return h;
}

std::vector<std::string> compile_contexts_from_json(const nlohmann::json& j) {
  if (!j.is_array()) throw std::out_of_range("compile_contexts must be a list of strings");
  if (j.size() > std::numeric_limits<ContextIndex>::max())
    throw std::out_of_range("more than 65,535 compile contexts (an event names one in 16 bits)");
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& c : j) {
    if (!c.is_string() || c.get_ref<const std::string&>().empty())
      throw std::out_of_range("a compile context must be a non-empty string");
    if (!seen.insert(c.get<std::string>()).second) throw std::out_of_range("a compile context is listed twice");
    out.push_back(c.get<std::string>());
  }
  return out;
}

}  // namespace fraglab
