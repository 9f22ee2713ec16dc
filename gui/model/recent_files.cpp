#include "gui/model/recent_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "traces/io/atomic_file.h"

namespace fraglab::gui {

std::string RecentFiles::default_path() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) return std::string(xdg) + "/fraglab/recent";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.config/fraglab/recent";
  return "";
}

RecentFiles::RecentFiles(std::string file) : file_(std::move(file)) {
  if (file_.empty()) return;
  std::ifstream in(file_);
  std::string line;
  while (std::getline(in, line) && paths_.size() < kMax)
    if (!line.empty() && std::find(paths_.begin(), paths_.end(), line) == paths_.end()) paths_.push_back(line);
}

bool RecentFiles::add(const std::string& path) {
  std::error_code ec;
  std::string absolute = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec) absolute = path;
  paths_.erase(std::remove(paths_.begin(), paths_.end(), absolute), paths_.end());
  paths_.insert(paths_.begin(), absolute);
  if (paths_.size() > kMax) paths_.resize(kMax);
  if (file_.empty()) return false;
  try {
    std::filesystem::create_directories(std::filesystem::path(file_).parent_path());
    AtomicFile out(file_);
    for (const auto& p : paths_) out.write(p + "\n");
    out.commit();
    return true;
  } catch (const std::exception&) {
    return false;  // a read-only home must not stop anyone from opening traces
  }
}

}  // namespace fraglab::gui
