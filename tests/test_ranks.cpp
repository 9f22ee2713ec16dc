// fraglab ranks (report/ranks.h): one job's per-rank snapshots read together.
#include <catch2/catch.hpp>

#include "report/ranks.h"

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
