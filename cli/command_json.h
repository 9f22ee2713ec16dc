// What each command computes and prints as JSON, shared by the command line (cli/cmd_*.cpp) and the
// Python module (python/src/module.cpp): one function per command builds the `--json` document from
// what the command computed, so `fraglab X --json` and `fraglab.X(...)` in Python give the same numbers
// under the same keys. The steps between loading a trace and the result (the capacity a recording's OOMs
// show, the bounds, the checks that refuse an input) live here too, for the same reason.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "device/sim_device.h"
#include "report/diagnose.h"
#include "report/program_attribution.h"
#include "report/trace_diff.h"
#include "report/tune.h"
#include "sim/bounds.h"
#include "sim/fidelity.h"
#include "sim/replay.h"
#include "traces/history_check.h"
#include "traces/trace.h"
#include "traces/trace_stats.h"

namespace fraglab::cli {

// Every --json document is an object that starts with "schema_version" (this) and "command" (its name);
// docs/json.md has the contract, docs/schemas/ one JSON Schema per command.
constexpr int kJsonSchemaVersion = 1;

// --capacity text ("80GiB", "" = unlimited) and --addresses ("cuda", "bump") -> device config.
SimDeviceConfig sim_config(const std::string& capacity, const std::string& addresses = "auto");

// --- info
// The allocator's state before the first entry (a mid-run history) or the whole of a snapshot
// without history: reserved, allocated, and how its free space is cut up.
struct StateSummary {
  uint64_t segments = 0, reserved = 0, allocated = 0, live_blocks = 0, free_blocks = 0, largest_free = 0;
};
StateSummary summarize_state(const InitialState& st);
// `info --json` without --at.
nlohmann::json info_json(const std::string& name, const TraceMeta& m, const TraceStats& s,
                         const HistoryProblems& impossible);
// Refuses (std::invalid_argument) an --at that is not oom, peak or an event index.
void check_at(const std::string& at);
// The moments `--at` names (oom: each recorded OOM, else the live peak; peak; an event index), each with
// who holds the live memory just before it.
std::vector<std::pair<uint64_t, LiveAttribution>> moments_at(const Trace& t, const std::string& at,
                                                             const TraceStats& stats);
// info's `at`: one attribution per moment, with its event_index.
nlohmann::json moments_json(const std::vector<std::pair<uint64_t, LiveAttribution>>& moments);

// --- replay
// A loaded trace ready to replay: its bounds and the device it replays on (the capacity a recording's
// OOMs show when none is given), and the notes the command prints on stderr.
struct PreparedReplay {
  TraceBounds bounds;
  SimDeviceConfig config;
  std::vector<std::string> notes;
};
PreparedReplay prepare_replay(const Trace& trace, const std::string& name, const std::string& capacity,
                              const std::string& addresses, bool oracle_bound);
// The known differences of a policy's model from the real allocator ("" when none).
std::string policy_accuracy_note(const std::string& policy);
// `replay --json`: `results`, one object per policy replayed (a list for one policy too).
nlohmann::json replay_json(const std::vector<ReplayResult>& results, const std::string& name, uint64_t bound);

// --- fidelity
// Why fidelity cannot check this trace (an empty snapshot, no device calls recorded); nullopt when it can.
std::optional<std::string> fidelity_refusal(const Trace& trace, const std::string& name);
struct FidelityRun {
  FidelityOptions options;
  std::string capacity_note;                   // how the capacity was inferred, when it was
  std::vector<SkippedAction> skipped_actions;  // the trace's (TraceMeta::skipped_actions)
  FidelityResult result;
};
// `capacity`: "" for the one the recording's OOMs show (none: unlimited).
FidelityRun run_fidelity_check(const Trace& trace, const std::string& policy, const std::string& capacity,
                               bool hint_addresses);
nlohmann::json fidelity_json(const std::string& name, const FidelityRun& run);

// --- tune
// "max_split_size_mb:{unset,64,128}" -> a search dimension ("unset" = the default).
TuneDimension parse_dimension(const std::string& text);
nlohmann::json tune_json(const TuneReport& r);

// --- diagnose
const char* diagnose_source_name(Diagnosis::Source s);
// Diagnoses a loaded trace: the capacity is `capacity`, else the one its OOMs show (`note` says so).
DiagnoseReport run_diagnose(const Trace& trace, const std::string& name, std::optional<uint64_t> capacity,
                            const DiagnoseOptions& options, std::string* note);
nlohmann::json diagnose_json(const DiagnoseReport& r, const Trace& trace, const BatchModel* probes);

// --- diff
int64_t signed_delta(uint64_t a, uint64_t b);  // b - a
nlohmann::json diff_json(const TraceDiff& d);

}  // namespace fraglab::cli
