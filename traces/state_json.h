// The allocator states a trace carries (the state at the first event of a mid-run history, the
// recording's final segments) as JSON, for the native format's meta section and the JSON Lines
// header: one encoding, written and read in one place.
#pragma once

#include <nlohmann/json.hpp>

#include "traces/trace.h"

namespace fraglab {

nlohmann::json segments_to_json(const std::vector<RecordedSegment>& segments);
// Throws std::out_of_range / nlohmann::json::exception on a malformed value (callers turn them into
// FormatErrors with their file and offset or line).
std::vector<RecordedSegment> segments_from_json(const nlohmann::json& j, size_t stream_count, size_t stack_count);

nlohmann::json initial_to_json(const InitialState& state);
// [[time_us, "START"|"END"|"MARK", name], ...]; from_json skips malformed items (annotations only inform reports).
nlohmann::json annotations_to_json(const std::vector<Annotation>& annotations);
std::vector<Annotation> annotations_from_json(const nlohmann::json& j);
// [[action, reading], ...] (TraceMeta::skipped_actions); malformed items are skipped.
nlohmann::json skipped_actions_to_json(const std::vector<SkippedAction>& skipped);
std::vector<SkippedAction> skipped_actions_from_json(const nlohmann::json& j);
// TraceMeta::host as an object of counts; absent or malformed counts read as 0.
nlohmann::json host_memory_to_json(const HostMemory& h);
HostMemory host_memory_from_json(const nlohmann::json& j);
InitialState initial_from_json(const nlohmann::json& j, size_t stream_count, size_t stack_count);

// The pool table (TraceMeta::pools, [[a, b], ...], the default pools first).
nlohmann::json pools_to_json(const std::vector<PoolInfo>& pools);
std::vector<PoolInfo> pools_from_json(const nlohmann::json& j);

// TraceMeta::compile_contexts: a list of distinct non-empty strings, at most 65,535 (an event's index is
// 16 bits); throws std::out_of_range otherwise.
std::vector<std::string> compile_contexts_from_json(const nlohmann::json& j);

// TraceMeta::expandable_flipped: [[first, end], ...] Alloc ordinals, ascending and disjoint; end may be
// 2^64 - 1 (to the end of the trace).
nlohmann::json ranges_to_json(const std::vector<std::pair<uint64_t, uint64_t>>& ranges);
std::vector<std::pair<uint64_t, uint64_t>> ranges_from_json(const nlohmann::json& j);

}  // namespace fraglab
