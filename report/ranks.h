// `fraglab ranks`: one job's per-rank snapshots read together (a DDP or FSDP job dumps one per rank).
//
// Each rank's run is summarized as `fraglab diff` summarizes one side (its recorded and replayed peaks,
// fragmentation at the peak, OOMs, allocations by site and category) and checked against the recording
// (`fidelity`). Then, across ranks: where each rank's allocations first differ from the reference rank's
// (the lowest-numbered), which rank reaches the limit first and why (its OOM, else the highest peak against
// the capacity; what it holds at its live peak beyond the lightest rank, by call site and category), and one
// PYTORCH_CUDA_ALLOC_CONF that fits every rank (tune's search per rank, the candidates of each tried on all,
// the lowest worst-rank peak among those that fit every one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/compare_results.h"
#include "report/trace_diff.h"

namespace fraglab {

// One point of a rank's timeline: the job's clock (the snapshots' wall-clock microseconds, shared by the ranks
// of one host, so ranks overlay), the live requested bytes and the recorded reserved bytes (segment events;
// what existed before a late-started history is not counted) just after that event.
struct RankPoint {
  int64_t time_us = 0;
  uint64_t event = 0;
  uint64_t live = 0, reserved = 0;
};

struct RankRun {
  int rank = 0;
  std::string path;
  int device = 0;
  RunSummary run;
  bool fidelity_exact = false;
  std::string fidelity_note;  // the first divergence, when not exact
  int64_t first_oom_time_us = INT64_MAX;
  uint64_t first_oom_event = 0;
  // The first OOM, in the program's terms: the request, what was live just before it, where and when.
  uint64_t oom_request = 0, oom_live_bytes = 0;
  uint32_t oom_step = 0;  // 1-based (0: before the first step)
  std::string oom_phase, oom_site;
  std::vector<RankPoint> timeline;  // at most kRankTimelinePoints, each bucket's highest live bytes
};
constexpr size_t kRankTimelinePoints = 1500;

struct RankDivergence {
  int rank = 0;
  uint64_t alloc_ordinal = 0;  // the first allocation that differs from the reference rank's
  uint64_t event_index = 0;    // in this rank's trace
  uint64_t size = 0, reference_size = 0;
  bool same = true;  // every allocation alike (sizes and order)
  uint64_t allocs = 0, reference_allocs = 0;
};

struct RanksOptions {
  std::optional<uint64_t> capacity;  // else each rank's own, inferred from its OOMs
  bool search = true;
  unsigned jobs = 0;
};

struct RanksReport {
  std::vector<RankRun> ranks;                               // by rank
  std::vector<RankDivergence> divergence;                   // per rank other than the reference
  int limit_rank = -1;                                      // the rank that reaches the limit first
  std::string limit_reason;                                 // for people
  std::vector<GroupDiff> extra_by_site, extra_by_category;  // the limit rank against the lightest rank
  std::string fits_all_conf;                                // one setting for every rank ("" = every default)
  uint64_t fits_all_worst_peak = 0;
  bool fits_all = false;  // every rank fits its capacity under it (or, without capacities, the lowest worst peak)
  bool capacities_known = false;
  // Ranks no setting can fit: the live bytes at their worst OOM exceed the capacity (by so many bytes).
  std::vector<std::pair<int, uint64_t>> beyond_any_setting;
  size_t settings_tried = 0;
};

// The files of a directory that hold traces (sorted), or the files given, grouped by job: a file's name with
// its "rankN" taken out names its job ("ddp.default_rank1.pickle.gz" -> "ddp.default"), so a directory of
// several jobs' dumps reads as several jobs. Throws std::invalid_argument when a job has one file.
std::vector<std::pair<std::string, std::vector<std::string>>> rank_jobs(const std::vector<std::string>& args);
// The files given grouped by job as rank_jobs does, without its checks: jobs of one file are kept (a plain
// trace beside rank sets). Files named with no rank form their own one-file jobs.
std::vector<std::pair<std::string, std::vector<std::string>>> group_by_job(const std::vector<std::string>& files);
// The rank a file is by its name ("rank3", "rank_3", "rank-3"); -1 when it names none.
int rank_in_name(const std::string& path);
// One job's snapshots in a directory (or the files given, or DIR/JOB: the job of that name among DIR's
// snapshots, e.g. "ranks/ddp.default" for ranks/ddp.default_rank{0,1}.pickle.gz), by rank: throws
// std::invalid_argument unless they form exactly one job of two or more ranks, each rank once.
std::vector<std::pair<int, std::string>> rank_set(const std::vector<std::string>& args);

// `fraglab compare --ranks`: per job of two or more ranks among the results' traces, per policy, each rank's
// peak reserved and the job's worst (a job fits a device where its worst rank does). Markdown; "" when the
// traces hold no rank set.
std::string rank_sets_markdown(const CompareResults& results);

// A rank's timeline (RankPoint), thinned to at most `points`.
std::vector<RankPoint> rank_timeline(const Trace& trace, size_t points = kRankTimelinePoints);
// Throws FormatError / std::invalid_argument on bad input.
RanksReport read_ranks(const std::vector<std::string>& files, const RanksOptions& options);

}  // namespace fraglab
