// A set of rank snapshots (one job's per-rank dumps) read together on a worker for the ranks view:
// `fraglab ranks` without its settings search (report/ranks.h): each rank's peaks, OOMs, fidelity and
// timeline on the job's clock, where ranks diverge, the rank that reaches the limit first.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "report/ranks.h"

namespace fraglab::gui {

class RanksRun {
 public:
  // `files`: by rank (report/ranks.h rank_set). The worker starts at once.
  explicit RanksRun(std::vector<std::pair<int, std::string>> files);
  ~RanksRun();
  RanksRun(const RanksRun&) = delete;
  RanksRun& operator=(const RanksRun&) = delete;

  const std::vector<std::pair<int, std::string>>& files() const { return files_; }
  bool settled() const;
  std::shared_ptr<const RanksReport> report() const;  // null until read, or on error
  std::string error() const;

 private:
  std::vector<std::pair<int, std::string>> files_;
  mutable std::mutex mutex_;
  std::shared_ptr<const RanksReport> report_;
  std::string error_;
  bool done_ = false;
  std::jthread worker_;
};

// The rank set a command line names, if any: a directory of one job's rank snapshots, or two or more files of
// one job named rankN. Empty when the arguments are not one (then they are traces as before).
std::vector<std::pair<int, std::string>> rank_set_of(const std::vector<std::string>& args);

}  // namespace fraglab::gui
