// The most recently opened traces, newest first, kept in $XDG_CONFIG_HOME/fraglab/recent
// (~/.config/fraglab/recent), one path a line.
#pragma once

#include <string>
#include <vector>

namespace fraglab::gui {

class RecentFiles {
 public:
  static constexpr size_t kMax = 12;

  // `file` empty: the default location. A missing or unreadable file is an empty list.
  explicit RecentFiles(std::string file = default_path());
  static std::string default_path();

  const std::vector<std::string>& paths() const { return paths_; }
  // Moves `path` to the front and saves; returns false (and keeps the list) when saving fails.
  bool add(const std::string& path);

 private:
  std::string file_;
  std::vector<std::string> paths_;
};

}  // namespace fraglab::gui
