#include "report/compare_results.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include "traces/io/atomic_file.h"
#include "traces/io/format_error.h"
#include "traces/io/json_depth.h"
#include "traces/io/read_limits.h"

namespace fraglab {

using nlohmann::json;

namespace {

// A row's fields, each declared once: results.json's key (and results.csv's column) with the member it
// holds. The device calls sit in their own object; version 1 (fraglab_compare 1) named them singular.
struct RowCount {
  const char* key;
  uint64_t CompareRow::*member;
};
constexpr RowCount kRowCounts[] = {
    {"events", &CompareRow::events},
    {"allocs", &CompareRow::allocs},
    {"live_bytes_bound", &CompareRow::live_bytes_bound},
    {"recorded_peak_reserved", &CompareRow::recorded_peak_reserved},
    {"peak_reserved", &CompareRow::peak_reserved},
    {"peak_reserved_event", &CompareRow::peak_reserved_event},
    {"peak_allocated", &CompareRow::peak_allocated},
    {"free_at_peak", &CompareRow::free_at_peak},
    {"largest_free_at_peak", &CompareRow::largest_free_at_peak},
    {"free_ranges_at_peak", &CompareRow::free_ranges_at_peak},
    {"ooms", &CompareRow::ooms},
};
struct CallCount {
  const char* key;
  const char* v1_key;
  uint64_t CompareRow::*member;
};
constexpr CallCount kCallCounts[] = {
    {"segment_allocs", "segment_alloc", &CompareRow::segment_allocs},
    {"segment_frees", "segment_free", &CompareRow::segment_frees},
    {"maps", "map", &CompareRow::maps},
    {"unmaps", "unmap", &CompareRow::unmaps},
    {"reserves", "reserve", &CompareRow::reserves},
    {"releases", "release", &CompareRow::releases},
    {"failed", "failed", &CompareRow::failed_device_calls},
};

std::string csv_field(const std::string& s);
template <uint64_t CompareRow::*member>
std::string count(const CompareRow& row) {
  return std::to_string(row.*member);
}
std::string ratio(double v) { return fmt::format("{:.6f}", v); }

// results.csv's columns, in order: the counts, the ratios derived from them, the device calls summed.
struct CsvColumn {
  const char* name;
  std::string (*value)(const CompareRow&);
};
const CsvColumn kCsvColumns[] = {
    {"trace", [](const CompareRow& r) { return csv_field(r.trace); }},
    {"policy", [](const CompareRow& r) { return csv_field(r.policy); }},
    {"events", count<&CompareRow::events>},
    {"allocs", count<&CompareRow::allocs>},
    {"live_bytes_bound", count<&CompareRow::live_bytes_bound>},
    {"peak_reserved", count<&CompareRow::peak_reserved>},
    {"peak_allocated", count<&CompareRow::peak_allocated>},
    {"reserved_over_bound", [](const CompareRow& r) { return ratio(r.reserved_over_bound()); }},
    {"gap_bytes", [](const CompareRow& r) { return std::to_string(r.gap_bytes()); }},
    {"fragmentation_at_peak", [](const CompareRow& r) { return ratio(r.fragmentation_at_peak()); }},
    {"free_at_peak", count<&CompareRow::free_at_peak>},
    {"largest_free_at_peak", count<&CompareRow::largest_free_at_peak>},
    {"free_ranges_at_peak", count<&CompareRow::free_ranges_at_peak>},
    {"device_calls", [](const CompareRow& r) { return std::to_string(r.device_calls()); }},
    {"segment_allocs", count<&CompareRow::segment_allocs>},
    {"segment_frees", count<&CompareRow::segment_frees>},
    {"maps", count<&CompareRow::maps>},
    {"unmaps", count<&CompareRow::unmaps>},
    {"failed_device_calls", count<&CompareRow::failed_device_calls>},
    {"ooms", count<&CompareRow::ooms>},
    {"recorded_peak_reserved", count<&CompareRow::recorded_peak_reserved>},
};

}  // namespace

double CompareRow::reserved_over_bound() const {
  return live_bytes_bound ? static_cast<double>(peak_reserved) / static_cast<double>(live_bytes_bound) : 0.0;
}

double CompareRow::fragmentation_at_peak() const {
  return free_at_peak ? 1.0 - static_cast<double>(largest_free_at_peak) / static_cast<double>(free_at_peak) : 0.0;
}

ShardId ShardId::parse(const std::string& text) {
  ShardId s;
  size_t slash = text.find('/');
  size_t used_k = 0, used_n = 0;
  try {
    if (slash == std::string::npos) throw std::invalid_argument("");
    s.index = std::stoi(text.substr(0, slash), &used_k);
    s.count = std::stoi(text.substr(slash + 1), &used_n);
  } catch (const std::exception&) {
    used_k = 0;
  }
  if (used_k == 0 || used_k != slash || used_n != text.size() - slash - 1 || s.count < 1 || s.index < 1 ||
      s.index > s.count)
    throw std::invalid_argument("--shard '" + text + "' is not K/N with 1 <= K <= N");
  return s;
}

std::vector<const CompareRow*> CompareResults::cell_table() const {
  std::map<std::string, size_t> t_index, p_index;
  for (size_t t = 0; t < traces.size(); ++t) t_index.emplace(traces[t], t);
  for (size_t p = 0; p < policies.size(); ++p) p_index.emplace(policies[p], p);
  std::vector<const CompareRow*> table(traces.size() * policies.size(), nullptr);
  for (const auto& row : rows) {
    auto t = t_index.find(row.trace);
    auto p = p_index.find(row.policy);
    if (t != t_index.end() && p != p_index.end()) table[t->second * policies.size() + p->second] = &row;
  }
  return table;
}

size_t CompareResults::trace_index(const std::string& trace) const {
  auto it = std::find(traces.begin(), traces.end(), trace);
  if (it == traces.end()) throw std::invalid_argument("row for trace " + trace + " not in the trace list");
  return static_cast<size_t>(it - traces.begin());
}

size_t CompareResults::policy_index(const std::string& policy) const {
  auto it = std::find(policies.begin(), policies.end(), policy);
  if (it == policies.end()) throw std::invalid_argument("row for policy " + policy + " not in the policy list");
  return static_cast<size_t>(it - policies.begin());
}

void CompareResults::sort_rows() {
  std::vector<std::pair<size_t, CompareRow>> keyed;
  for (auto& row : rows)
    keyed.emplace_back(trace_index(row.trace) * policies.size() + policy_index(row.policy), std::move(row));
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  rows.clear();
  for (auto& [key, row] : keyed) rows.push_back(std::move(row));
}

// ---- CSV ----

namespace {

// RFC 4180: quote fields holding separators or quotes (policy strings have commas).
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string results_csv(const CompareResults& r) {
  std::string out;
  for (const CsvColumn& c : kCsvColumns) out += std::string(out.empty() ? "" : ",") + c.name;
  out += '\n';
  for (const auto& row : r.rows) {
    for (const CsvColumn& c : kCsvColumns) out += (&c == kCsvColumns ? "" : ",") + c.value(row);
    out += '\n';
  }
  return out;
}

// ---- JSON ----

namespace {

json row_json(const CompareRow& row) {
  json j = {{"trace", row.trace},
            {"policy", row.policy},
            {"reserved_over_bound", row.reserved_over_bound()},
            {"gap_bytes", row.gap_bytes()},
            {"external_fragmentation_at_peak", row.fragmentation_at_peak()},
            {"series", {{"event", row.series_event}, {"reserved", row.series_reserved}}}};
  for (const RowCount& c : kRowCounts) j[c.key] = row.*c.member;
  json calls = {{"total", row.device_calls()}};
  for (const CallCount& c : kCallCounts) calls[c.key] = row.*c.member;
  j["device_calls"] = std::move(calls);
  return j;
}

// One object per line: diffable, and a million rows still stream through line tools.
std::string document(const json& head, const std::vector<json>& rows) {
  std::string out = "{\n";
  for (auto it = head.begin(); it != head.end(); ++it) out += fmt::format("  \"{}\": {},\n", it.key(), it->dump());
  out += "  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i)
    out += (i ? ",\n    " : "\n    ") + rows[i].dump(-1, ' ', false, json::error_handler_t::replace);
  out += rows.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

json head_json(const CompareResults& r) {
  // schema_version/command: the --json contract (docs/json.md); fraglab_compare: this file's own version,
  // 2 since the device-call keys are the other commands' (merge reads 1 and 2).
  json head = {{"schema_version", 1},  {"command", "compare"},
               {"fraglab_compare", 2}, {"capacity", r.capacity ? json(*r.capacity) : json(nullptr)},
               {"traces", r.traces},   {"policies", r.policies}};
  if (r.shard) head["shard"] = fmt::format("{}/{}", r.shard->index, r.shard->count);
  return head;
}

}  // namespace

std::string results_json(const CompareResults& r) {
  std::vector<json> rows;
  for (const auto& row : r.rows) rows.push_back(row_json(row));
  return document(head_json(r), rows);
}

std::string timings_json(const CompareResults& r) {
  std::vector<json> rows;
  for (const auto& row : r.rows)
    rows.push_back({{"trace", row.trace}, {"policy", row.policy}, {"replay_seconds", row.replay_seconds}});
  return document(head_json(r), rows);
}

// ---- reading ----

namespace {

json parse_file(const std::string& path) {
  // The parsed document takes about ten times the file's size: a results file past this size (far
  // beyond what compare writes for 10,000 configurations) is refused before it is read.
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes > kMaxResultsBytes)
    throw FormatError::in_file(path, fmt::format("{} bytes; results files are read up to {} MiB (docs/limits.md)",
                                                 bytes, kMaxResultsBytes >> 20));
  std::string text = read_file(path);
  if (uint64_t at = json_too_deep_at(text, kMaxJsonDepth); at != UINT64_MAX)
    throw FormatError::at_offset(path, at, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw FormatError::at_offset(path, e.byte, std::string("not valid JSON: ") + e.what());
  }
}

// nlohmann's get<uint64_t>() casts a float or a negative number (1e300 and -1 both came out
// as 0, silently), so counts must be unsigned integers and times finite non-negative numbers.
template <typename T>
bool has_type(const json& v) {
  if constexpr (std::is_same_v<T, uint64_t>) return v.is_number_unsigned();
  if constexpr (std::is_same_v<T, double>)
    return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0;
  if constexpr (std::is_same_v<T, std::vector<uint64_t>>)
    return v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number_unsigned(); });
  return true;  // strings and nested objects: nlohmann's own type check suffices
}

template <typename T>
T field(const json& j, const char* key, const std::string& path, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw FormatError::in_file(path, where + ": missing \"" + key + "\"");
  if (!has_type<T>(*it))
    throw FormatError::in_file(path, where + ": \"" + key + "\" is out of range or has the wrong type");
  try {
    return it->template get<T>();
  } catch (const json::exception&) {
    throw FormatError::in_file(path, where + ": \"" + key + "\" has the wrong type");
  }
}

CompareRow read_row(const json& j, const std::string& path, const std::string& where) {
  if (!j.is_object()) throw FormatError::in_file(path, where + " is not an object");
  CompareRow row;
  row.trace = field<std::string>(j, "trace", path, where);
  row.policy = field<std::string>(j, "policy", path, where);
  for (const RowCount& c : kRowCounts) row.*c.member = field<uint64_t>(j, c.key, path, where);
  json calls = field<json>(j, "device_calls", path, where);
  std::string cw = where + " device_calls";
  // Version 1 named the calls in the singular (segment_alloc, map, ...).
  const bool v1 = !calls.contains("segment_allocs") && calls.contains("segment_alloc");
  for (const CallCount& c : kCallCounts) row.*c.member = field<uint64_t>(calls, v1 ? c.v1_key : c.key, path, cw);
  json series = field<json>(j, "series", path, where);
  row.series_event = field<std::vector<uint64_t>>(series, "event", path, where + " series");
  row.series_reserved = field<std::vector<uint64_t>>(series, "reserved", path, where + " series");
  if (row.series_event.size() != row.series_reserved.size())
    throw FormatError::in_file(path, where + ": series event and reserved differ in length");
  return row;
}

void read_timings(CompareResults& r, const std::string& path) {
  json doc = parse_file(path);
  std::map<std::pair<std::string, std::string>, double> seconds;
  const json rows = doc.is_object() ? doc.value("rows", json::array()) : json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string where = "timing " + std::to_string(i + 1);
    seconds[{field<std::string>(rows[i], "trace", path, where), field<std::string>(rows[i], "policy", path, where)}] =
        field<double>(rows[i], "replay_seconds", path, where);
  }
  for (auto& row : r.rows) {
    auto it = seconds.find({row.trace, row.policy});
    if (it != seconds.end()) row.replay_seconds = it->second;
  }
}

}  // namespace

CompareResults read_results(const std::string& path, const std::string& timings_path) {
  json doc = parse_file(path);
  if (!doc.is_object() || !doc.contains("fraglab_compare"))
    throw FormatError::in_file(path, "not a fraglab compare results file (no \"fraglab_compare\" key)");
  if (doc["fraglab_compare"] != 1 && doc["fraglab_compare"] != 2)
    throw FormatError::in_file(path, "unsupported fraglab_compare version");
  CompareResults r;
  r.traces = field<std::vector<std::string>>(doc, "traces", path, "header");
  r.policies = field<std::vector<std::string>>(doc, "policies", path, "header");
  if (!doc["capacity"].is_null()) r.capacity = field<uint64_t>(doc, "capacity", path, "header");
  if (doc.contains("shard")) {
    try {
      r.shard = ShardId::parse(field<std::string>(doc, "shard", path, "header"));
    } catch (const std::invalid_argument& e) {
      throw FormatError::in_file(path, e.what());
    }
  }
  json rows = field<json>(doc, "rows", path, "header");
  if (!rows.is_array()) throw FormatError::in_file(path, "\"rows\" is not an array");
  for (size_t i = 0; i < rows.size(); ++i) r.rows.push_back(read_row(rows[i], path, "row " + std::to_string(i + 1)));
  try {
    r.sort_rows();
  } catch (const std::invalid_argument& e) {
    throw FormatError::in_file(path, e.what());
  }
  if (!timings_path.empty() && std::filesystem::exists(timings_path)) read_timings(r, timings_path);
  return r;
}

CompareResults merge_results(std::vector<CompareResults> shards, const std::vector<std::string>& names) {
  if (shards.empty()) throw std::invalid_argument("nothing to merge");
  CompareResults merged;
  merged.traces = shards[0].traces;
  merged.policies = shards[0].policies;
  merged.capacity = shards[0].capacity;
  int count = shards[0].shard ? shards[0].shard->count : 1;
  std::set<int> seen;
  for (size_t i = 0; i < shards.size(); ++i) {
    auto& s = shards[i];
    if (s.traces != merged.traces || s.policies != merged.policies || s.capacity != merged.capacity)
      throw std::invalid_argument(names[i] + " covers a different matrix (traces, policies or capacity) than " +
                                  names[0]);
    int index = s.shard ? s.shard->index : 1;
    if ((s.shard ? s.shard->count : 1) != count)
      throw std::invalid_argument(names[i] + " is from a run split into a different number of shards");
    if (!seen.insert(index).second)
      throw std::invalid_argument(names[i] + ": shard " + std::to_string(index) + " given twice");
    for (auto& row : s.rows) merged.rows.push_back(std::move(row));
  }
  for (int k = 1; k <= count; ++k)
    if (!seen.count(k))
      throw std::invalid_argument("shard " + std::to_string(k) + "/" + std::to_string(count) + " is missing");
  merged.sort_rows();
  std::set<std::pair<std::string, std::string>> cells;
  for (const auto& row : merged.rows)
    if (!cells.insert({row.trace, row.policy}).second)
      throw std::invalid_argument("trace " + row.trace + " x policy " + row.policy + " appears in two shards");
  if (cells.size() != merged.traces.size() * merged.policies.size())
    throw std::invalid_argument(fmt::format("the shards cover {} of {} trace x policy cells", cells.size(),
                                            merged.traces.size() * merged.policies.size()));
  return merged;
}

}  // namespace fraglab
