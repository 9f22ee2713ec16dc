#include "gui/model/ranks_run.h"

#include <filesystem>
#include <stdexcept>

namespace fraglab::gui {

RanksRun::RanksRun(std::vector<std::pair<int, std::string>> files) : files_(std::move(files)) {
  worker_ = std::jthread([this] {
    std::shared_ptr<const RanksReport> report;
    std::string error;
    try {
      std::vector<std::string> paths;
      for (const auto& f : files_) paths.push_back(f.second);
      RanksOptions o;
      o.search = false;  // the view shows the ranks; the setting for all is `fraglab ranks`' (a longer search)
      report = std::make_shared<const RanksReport>(read_ranks(paths, o));
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard lock(mutex_);
    report_ = std::move(report);
    error_ = std::move(error);
    done_ = true;
  });
}

RanksRun::~RanksRun() = default;  // the jthread joins

bool RanksRun::settled() const {
  std::lock_guard lock(mutex_);
  return done_;
}

std::shared_ptr<const RanksReport> RanksRun::report() const {
  std::lock_guard lock(mutex_);
  return report_;
}

std::string RanksRun::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

std::vector<std::pair<int, std::string>> rank_set_of(const std::vector<std::string>& args) {
  if (args.empty()) return {};
  std::error_code ec;
  bool directory = args.size() == 1 && std::filesystem::is_directory(args.front(), ec);
  if (!directory) {
    if (args.size() < 2) return {};
    for (const auto& a : args)
      if (rank_in_name(a) < 0) return {};
  }
  try {
    return rank_set(args);
  } catch (const std::invalid_argument&) {
    if (directory) throw;  // a directory that is not one job's ranks: say why
    return {};             // files of several jobs, or one rank twice: traces as before
  }
}

}  // namespace fraglab::gui
