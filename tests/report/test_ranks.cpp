// fraglab ranks (report/ranks.h): one job's per-rank snapshots read together.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gui/model/ranks_run.h"
#include "import/trace_import.h"
#include "report/ranks.h"
#include "traces/trace_io.h"

using namespace fraglab;

namespace {
const std::string kRanks = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/ranks/";
}

TEST_CASE("ranks: the rank that ran out of memory first, why, and that no setting saves it", "[ranks]") {
  // DDP on two H200s with uneven data (rank 1's batches 4x rank 0's) under set_per_process_memory_fraction(0.02):
  // rank 1 ran out in a forward at step 3, and both ranks stopped and dumped (scripts/record_torch_traces.py,
  // ddp_uneven_oom).
  RanksOptions o;
  o.capacity = 3002197606;  // 0.02 x the H200's 150,109,880,320 bytes
  o.jobs = 2;
  RanksReport r = read_ranks({kRanks + "ddp_uneven_oom.expandable_rank1_cap0.02.stacks.pickle.gz",
                              kRanks + "ddp_uneven_oom.expandable_rank0_cap0.02.stacks.pickle.gz"},
                             o);
  REQUIRE(r.ranks.size() == 2);
  CHECK(r.ranks[0].rank == 0);  // ordered by rank, whatever the order given
  CHECK(r.ranks[1].rank == 1);
  for (const auto& k : r.ranks) CHECK(k.fidelity_exact);
  CHECK(r.ranks[1].run.recorded_ooms == 1);
  CHECK(r.ranks[0].run.recorded_ooms == 0);
  CHECK(r.limit_rank == 1);
  CHECK(r.limit_reason.find("ran out of memory first") != std::string::npos);
  REQUIRE(r.divergence.size() == 1);
  CHECK_FALSE(r.divergence[0].same);
  // What rank 1 holds beyond rank 0 at its live peak: more activations (its larger batch).
  REQUIRE_FALSE(r.extra_by_category.empty());
  CHECK(r.extra_by_category.front().key == "activations");
  CHECK(r.extra_by_category.front().delta_live_at_peak() > 0);
  // Its live bytes at the OOM (with the request) pass the capacity: no setting fits that rank.
  CHECK_FALSE(r.fits_all);
  REQUIRE(r.beyond_any_setting.size() == 1);
  CHECK(r.beyond_any_setting[0].first == 1);
}

TEST_CASE("ranks: a directory of several jobs' dumps reads as several jobs", "[ranks]") {
  auto jobs = rank_jobs({kRanks});
  REQUIRE(jobs.size() >= 5);
  for (const auto& [job, files] : jobs) {
    CHECK(job.find("rank") == std::string::npos);
    CHECK(files.size() == 2);
  }
  CHECK_THROWS_AS(rank_jobs({kRanks + "ddp_train.default_rank0.pickle.gz"}), std::invalid_argument);
  RanksOptions o;
  o.search = false;
  RanksReport r =
      read_ranks({kRanks + "ddp_train.default_rank0.pickle.gz", kRanks + "ddp_train.default_rank1.pickle.gz"}, o);
  CHECK(r.limit_reason.find("no rank ran out") != std::string::npos);
  for (const auto& k : r.ranks) CHECK(k.fidelity_exact);
}

namespace {
const std::string kH200 = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/ranks_h200/";
}

TEST_CASE("ranks on two H200s: DDP, FSDP2, pipeline parallel and uneven DDP replay exactly on every rank", "[ranks]") {
  // scripts/record_ranks_job.sh (tests/data/snapshots/SOURCE.md): each job's every rank, defaults and expandable.
  auto jobs = rank_jobs({kH200});
  REQUIRE(jobs.size() == 10);
  RanksOptions o;
  o.search = false;
  for (const auto& [job, files] : jobs) {
    INFO(job);
    RanksReport r = read_ranks(files, o);
    REQUIRE(r.ranks.size() == 2);
    for (const auto& k : r.ranks) {
      INFO(k.path << ": " << k.fidelity_note);
      CHECK(k.fidelity_exact);
    }
    if (job.rfind("fsdp_train", 0) == 0) CHECK(r.divergence[0].same);  // FSDP shards evenly: the same allocations
    if (job.rfind("pp_train", 0) == 0) {
      // The last stage holds the head's logits: it differs from the first allocation on and reserves the most.
      CHECK_FALSE(r.divergence[0].same);
      CHECK(r.limit_rank == 1);
      CHECK(r.limit_reason.find("no rank ran out") != std::string::npos);
    }
  }
}

TEST_CASE("ranks: under the defaults rank 1 runs out in backward, from fragmentation, and rank 0 is dumped too",
          "[ranks]") {
  // Fraction 0.024 (3,602,637,127 bytes): rank 1 ran out in step 4's backward (a 256 MiB gradient bucket or
  // grad); rank 0 was stopped by the recorder (its watcher saw rank 1's OOM) and dumped where it stood.
  RanksOptions o;
  o.search = false;
  RanksReport r = read_ranks({kH200 + "ddp_uneven_oom.default_rank0_cap0.024.stacks.pickle.gz",
                              kH200 + "ddp_uneven_oom.default_rank1_cap0.024.stacks.pickle.gz"},
                             o);
  CHECK(r.limit_rank == 1);
  CHECK(r.ranks[0].run.recorded_ooms == 0);
  const RankRun& k = r.ranks[1];
  CHECK(k.run.recorded_ooms == 1);
  CHECK(k.oom_request == 256ull << 20);
  CHECK(k.oom_phase == "backward");
  CHECK(k.oom_step == 4);
  REQUIRE(k.run.capacity);
  CHECK(k.oom_live_bytes + k.oom_request <= *k.run.capacity);  // room enough, had it not been cached in pieces
  CHECK(r.limit_reason.find("fragmentation") != std::string::npos);
  CHECK(r.limit_reason.find("backward of step 4") != std::string::npos);
}

TEST_CASE("ranks: the one setting predicted for every rank is what the real run then did", "[ranks]") {
  // The uneven DDP job recorded to the end under the defaults at fraction 0.025, asked about fraction 0.024's
  // capacity. The real run of all 8 steps under the predicted setting at 0.024 fitted on both ranks with rank 1
  // peaking at 3,470,786,560 bytes (bundled: ddp_uneven_oom.max_split_size_mb-32_..._cap0.024), while under the
  // defaults rank 1 ran out (docs/gpu-results/ranks_rerun.md).
  RanksOptions o;
  o.capacity = 3602637127;
  o.jobs = 2;
  const std::vector<std::string> full = {kH200 + "ddp_uneven_oom.default_rank0_cap0.025.stacks.pickle.gz",
                                         kH200 + "ddp_uneven_oom.default_rank1_cap0.025.stacks.pickle.gz"};
  RanksReport r = read_ranks(full, o);
  for (const auto& k : r.ranks) CHECK(k.fidelity_exact);  // under the recording's own limit, not --capacity
  REQUIRE(r.fits_all);
  CHECK(r.fits_all_conf == "max_split_size_mb:32,garbage_collection_threshold:0.8");
  RanksOptions plain;
  plain.search = false;
  RanksReport real = read_ranks(
      {kH200 + "ddp_uneven_oom.max_split_size_mb-32_garbage_collection_threshold-0.8_rank0_cap0.024.stacks.pickle.gz",
       kH200 + "ddp_uneven_oom.max_split_size_mb-32_garbage_collection_threshold-0.8_rank1_cap0.024.stacks.pickle.gz"},
      plain);
  uint64_t worst = 0;
  for (const auto& k : real.ranks) {
    CHECK(k.run.recorded_ooms == 0);
    worst = std::max(worst, k.run.recorded_peak_reserved);
  }
  CHECK(r.fits_all_worst_peak == worst);
  // Below rank 1's live bytes no setting fits (fraction 0.023: the real run ran out under the least bad too).
  o.capacity = 3452527247;
  CHECK_FALSE(read_ranks(full, o).fits_all);
  // Without capacities the limit is the rank that reserves the most (bytes, not a ratio against one rank's).
  RanksReport bare = read_ranks(full, plain);
  CHECK(bare.limit_rank == 1);
}

TEST_CASE("ranks: a rank set by directory or DIR/JOB, timelines that keep the peak, compare's rank-set rows",
          "[ranks]") {
  auto set = rank_set({kH200 + "pp_train.expandable"});
  REQUIRE(set.size() == 2);
  CHECK(set[0].first == 0);
  CHECK(set[1].second.find("pp_train.expandable_rank1") != std::string::npos);
  CHECK_THROWS_AS(rank_set({kH200}), std::invalid_argument);  // ten jobs: not one rank set
  CHECK_THROWS_AS(rank_set({kH200 + "no_such_job"}), std::invalid_argument);
  CHECK(rank_in_name("a/b/ddp.default_rank12.pickle.gz") == 12);
  CHECK(rank_in_name("gpt2_train.default.pickle.gz") == -1);

  RanksOptions o;
  o.search = false;
  RanksReport r = read_ranks({set[0].second, set[1].second}, o);
  for (const auto& k : r.ranks) {
    REQUIRE_FALSE(k.timeline.empty());
    CHECK(k.timeline.size() <= kRankTimelinePoints);
    uint64_t top = 0;
    for (const RankPoint& p : k.timeline) top = std::max(top, p.live);
    CHECK(top == k.run.live_bytes_bound);  // thinning keeps each bucket's highest point
  }
  Trace t = load_trace(set[1].second, {kAnyDevice});
  CHECK(rank_timeline(t, 10).size() <= 10);

  CompareResults c;
  c.traces = {"x/job_rank0.pickle.gz", "x/job_rank1.pickle.gz", "x/plain.pickle.gz"};
  c.policies = {"pytorch"};
  for (size_t i = 0; i < 3; ++i) {
    CompareRow row;
    row.trace = c.traces[i];
    row.policy = "pytorch";
    row.peak_reserved = (i + 1) << 30;
    row.ooms = i == 1 ? 2 : 0;
    c.rows.push_back(row);
  }
  std::string md = rank_sets_markdown(c);
  CHECK(md.find("Rank set job (2 ranks)") != std::string::npos);
  CHECK(md.find("2.00 GiB (rank 1), 2 OOMs") != std::string::npos);
  CHECK(md.find("plain") == std::string::npos);
}

TEST_CASE("fraglab-gui: a rank set from the command line, read on a worker for the ranks view", "[ranks][gui]") {
  const std::string r0 = kH200 + "ddp_uneven_oom.default_rank0_cap0.024.stacks.pickle.gz";
  const std::string r1 = kH200 + "ddp_uneven_oom.default_rank1_cap0.024.stacks.pickle.gz";
  auto set = gui::rank_set_of({r1, r0});
  REQUIRE(set.size() == 2);
  CHECK(set[0].second == r0);
  CHECK(gui::rank_set_of({r0}).empty());                                              // one file: a trace as before
  CHECK(gui::rank_set_of({r0, kH200 + "pp_train.default_rank1.pickle.gz"}).empty());  // two jobs: a pair
  CHECK_THROWS_AS(gui::rank_set_of({kH200}), std::invalid_argument);  // a directory of ten jobs: said why
  gui::RanksRun run(set);
  while (!run.settled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(run.report());
  CHECK(run.report()->limit_rank == 1);
  CHECK(run.error().empty());
}

TEST_CASE("fraglab ranks --html, diff of two rank sets, compare --ranks: the command line", "[ranks][cli]") {
  auto dir = std::filesystem::temp_directory_path() / ("fraglab_ranks_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto run = [&](const std::string& args, const std::string& out) {
    return std::system((std::string(FRAGLAB_CLI) + " " + args + " >" + (dir / out).string() + " 2>&1").c_str());
  };
  auto read = [&](const std::string& name) {
    std::ifstream in(dir / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::string oom = kH200 + "ddp_uneven_oom.default_rank0_cap0.024.stacks.pickle.gz " + kH200 +
                    "ddp_uneven_oom.default_rank1_cap0.024.stacks.pickle.gz";
  REQUIRE(run("ranks --no-search --html " + (dir / "r.html").string() + " " + oom, "ranks.txt") == 0);
  std::string html = read("r.html");
  CHECK(html.find("<svg") != std::string::npos);
  CHECK(html.find("rank 1 ran out of memory first") != std::string::npos);
  CHECK(run("ranks --no-search --html " + kH200 + "ddp_uneven_oom.default_rank0_cap0.024.stacks.pickle.gz " + oom,
            "refused.txt") != 0);  // an output over an input
  REQUIRE(run("diff --json " + kH200 + "pp_train.default " + kH200 + "pp_train.expandable", "diff.json") == 0);
  CHECK(read("diff.json").find("\"rank\": 1") != std::string::npos);
  CHECK(run("diff " + kH200 + "pp_train.default " + kH200 + "no_such_job", "bad.txt") != 0);
  REQUIRE(run("compare -q --ranks -p pytorch -- " + oom, "compare.md") == 0);
  CHECK(read("compare.md").find("job's worst") != std::string::npos);
  std::filesystem::remove_all(dir);
}
