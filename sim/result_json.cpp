#include "sim/result_json.h"

namespace fraglab {

nlohmann::json to_json(const Fragmentation& f) {
  return {{"event_index", f.event_index}, {"reserved", f.reserved},
          {"allocated", f.allocated},     {"requested", f.requested},
          {"free_bytes", f.free_bytes},   {"largest_free", f.largest_free},
          {"free_ranges", f.free_ranges}, {"external_fragmentation", f.external()}};
}

nlohmann::json to_json(const DeviceCallCounts& c) {
  return {{"total", c.total()},
          {"segment_allocs", c.segment_allocs},
          {"segment_frees", c.segment_frees},
          {"maps", c.maps},
          {"unmaps", c.unmaps},
          {"reserves", c.reserves},
          {"releases", c.releases},
          {"failed", c.failed}};
}

nlohmann::json to_json(const ReplayResult& r) {
  nlohmann::json ooms = nlohmann::json::array();
  for (const auto& o : r.ooms)
    ooms.push_back({{"event_index", o.event_index},
                    {"size", o.size},
                    {"stream", o.stream},
                    {"reserved", o.reserved},
                    {"allocated", o.allocated},
                    {"recorded", o.recorded}});
  nlohmann::json recorded = nlohmann::json::array();
  for (const auto& o : r.recorded_ooms)
    recorded.push_back({{"event_index", o.event_index},
                        {"request_bytes", o.size},
                        {"stream", o.stream},
                        {"served", o.served},
                        {"reserved", o.reserved},
                        {"allocated", o.allocated}});
  return {
      {"policy", r.policy},
      {"addresses", address_model_name(r.addresses)},
      {"events", r.events},
      {"allocs", r.allocs},
      {"frees", r.frees},
      {"empty_caches", r.empty_caches},
      {"peak_requested", r.requested.bytes},
      {"peak_requested_event", r.requested.event_index},
      {"peak_allocated", r.allocated.bytes},
      {"peak_allocated_event", r.allocated.event_index},
      {"peak_reserved", r.reserved.bytes},
      {"peak_reserved_event", r.reserved.event_index},
      {"live_bytes_bound", r.live_bytes_bound},
      {"gap_to_live_bound", r.gap_to_live_bound()},
      {"oracle_bound", r.oracle_bound ? nlohmann::json(*r.oracle_bound) : nlohmann::json(nullptr)},
      {"gap_to_oracle", r.gap_to_oracle() ? nlohmann::json(*r.gap_to_oracle()) : nlohmann::json(nullptr)},
      {"fragmentation_at_peak", to_json(r.at_peak)},
      {"final", {{"reserved", r.final_reserved}, {"allocated", r.final_allocated}, {"requested", r.final_requested}}},
      {"device_calls", to_json(r.calls)},
      {"ooms", ooms},
      {"recorded_ooms", recorded},
      {"recorded_ooms_served", r.recorded_ooms_served()},
      {"stopped_on_oom", r.stopped_on_oom},
      {"replay_seconds", r.seconds},
  };
}

}  // namespace fraglab
