#include "report/report_output.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "report/compare_report.h"
#include "report/compare_stats.h"
#include "traces/io/atomic_file.h"

namespace fraglab {

namespace fs = std::filesystem;

namespace {

constexpr std::array<const char*, 5> kSetNames = {"results.csv", "results.json", "timings.json", "report.html",
                                                  "summary.md"};

bool is_set_name(const fs::path& name) {
  for (const char* n : kSetNames)
    if (name == n) return true;
  return false;
}

[[noreturn]] void fail(const std::string& what, const fs::path& path, int err) {
  throw std::runtime_error("cannot write " + path.string() + ": " + what + ": " + std::strerror(err));
}

// The files of one -o DIR run are one set: written into a fresh directory beside DIR, then
// swapped in with one rename, so a run killed part-way never leaves a new results.csv beside
// an old report.html. Files in DIR that are not part of a set stay where they are.
class DirectorySet {
 public:
  // Absolute paths: the swap may move the working directory itself (-o .).
  explicit DirectorySet(const std::string& dir) : dir_(fs::absolute(dir).lexically_normal()) {
    if (dir_.filename().empty()) dir_ = dir_.parent_path();  // "out/" -> "out"
    std::error_code ec;
    // A symlink to a directory: the set goes into the directory it names, the link stays (swapping
    // the link itself would replace it with a directory and move the user's files out of theirs).
    if (fs::is_symlink(fs::symlink_status(dir_, ec))) {
      fs::path target = fs::canonical(dir_, ec);
      if (ec) throw std::runtime_error("cannot write " + dir + ": a symlink to a missing directory");
      if (!fs::is_directory(target)) throw std::runtime_error("cannot write " + dir + ": not a directory");
      dir_ = target;
    }
    fs::path parent = dir_.has_parent_path() ? dir_.parent_path() : fs::path(".");
    fs::create_directories(parent, ec);
    if (ec) throw std::runtime_error("cannot create directory " + parent.string() + ": " + ec.message());
    if (fs::exists(dir_) && !fs::is_directory(dir_))
      throw std::runtime_error("cannot write " + dir + ": not a directory");
    staging_ = temp_name_beside(dir_.string());  // short: DIR's own name may be NAME_MAX long
    fs::remove_all(staging_, ec);
    guard_ = std::make_unique<TempPathGuard>(staging_.string(), true);
    if (::mkdir(staging_.c_str(), 0777) != 0) fail("cannot create a staging directory", staging_, errno);
  }
  ~DirectorySet() {
    std::error_code ec;
    if (!staging_.empty()) fs::remove_all(staging_, ec);
  }

  fs::path staged(const char* name) const { return staging_ / name; }

  // Puts the staged set in place of DIR's.
  void commit() {
    if (!fs::exists(dir_)) {
      if (::rename(staging_.c_str(), dir_.c_str()) != 0) fail("cannot rename the new set into place", dir_, errno);
      guard_->release();
      staging_.clear();
      return;
    }
    // Atomic swap where the filesystem has it; otherwise old aside, new in (a moment without DIR,
    // never a mixed set).
    fs::path old = staging_;
    if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, dir_.c_str(), RENAME_EXCHANGE) != 0) {
      old = staging_.string() + ".old";
      if (::rename(dir_.c_str(), old.c_str()) != 0) fail("cannot move the old set aside", dir_, errno);
      if (::rename(staging_.c_str(), dir_.c_str()) != 0) fail("cannot rename the new set into place", dir_, errno);
    }
    guard_->release();  // the staging directory is DIR now (the old set holds the user's files a moment)
    staging_ = old;     // now the old set; removed by the destructor
    for (const auto& entry : fs::directory_iterator(old)) {
      if (is_set_name(entry.path().filename())) continue;  // the old set's own files
      fs::path back = dir_ / entry.path().filename();
      if (!fs::exists(fs::symlink_status(back)) && ::rename(entry.path().c_str(), back.c_str()) != 0)
        fail("cannot move " + entry.path().string() + " back", back, errno);
    }
  }

 private:
  fs::path dir_, staging_;
  std::unique_ptr<TempPathGuard> guard_;
};

}  // namespace

std::string write_reports(const CompareResults& results, const ReportPaths& given, const std::string& command) {
  ReportPaths paths = given;
  std::unique_ptr<DirectorySet> set;
  if (!paths.dir.empty()) {
    set = std::make_unique<DirectorySet>(paths.dir);
    auto under = [&](std::string& p, const char* name) {
      if (p.empty()) p = set->staged(name).string();
    };
    under(paths.csv, kSetNames[0]);
    under(paths.json, kSetNames[1]);
    under(paths.timings, kSetNames[2]);
    under(paths.html, kSetNames[3]);
    under(paths.md, kSetNames[4]);
  }
  CompareSummary summary = summarize(results);
  std::string md = markdown_report(results, summary, command);
  std::vector<std::unique_ptr<AtomicFile>> files;
  auto emit = [&](const std::string& path, const std::string& text) {
    if (path.empty()) return;
    files.push_back(std::make_unique<AtomicFile>(path));
    files.back()->write(text);
  };
  emit(paths.csv, results_csv(results));
  emit(paths.json, results_json(results));
  emit(paths.timings, timings_json(results));
  emit(paths.html, html_report(results, summary, command));
  emit(paths.md, md);
  for (auto& f : files) f->commit();
  if (set) set->commit();
  return md;
}

}  // namespace fraglab
