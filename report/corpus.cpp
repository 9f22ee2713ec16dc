#include "report/corpus.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "traces/trace_io.h"

namespace fraglab {

namespace fs = std::filesystem;

namespace {

bool is_glob(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }

// Symbolic links to directories are not followed: a loop (`self -> .`) would fail the walk, and a
// link to / would walk the whole file system. Links to files are taken like the files.
void add_directory(const std::string& dir, std::vector<std::string>& out) {
  try {
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      std::error_code ec;
      if (!entry.is_regular_file(ec)) continue;  // a dangling link is no trace either
      std::string path = entry.path().string();
      if (looks_like_trace_file(path)) out.push_back(path);
    }
  } catch (const fs::filesystem_error& e) {
    throw std::invalid_argument("cannot scan directory " + dir + " for traces: " +
                                (e.path1().empty() ? std::string() : e.path1().string() + ": ") + e.code().message());
  }
}

void add_path(const std::string& path, std::vector<std::string>& out) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    size_t before = out.size();
    add_directory(path, out);
    if (out.size() == before) throw std::invalid_argument("no trace files in directory " + path);
  } else if (fs::exists(path, ec)) {
    out.push_back(path);
  } else {
    throw std::invalid_argument("no such trace file or directory: " + path);
  }
}

std::vector<std::string> glob_matches(const std::string& pattern) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> matches;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) matches.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || matches.empty()) throw std::invalid_argument("pattern matches no file: " + pattern);
  if (rc != 0) throw std::invalid_argument("cannot expand pattern " + pattern);
  return matches;
}

}  // namespace

std::string trace_display_name(const std::string& path) {
  return strip_trace_extension(fs::path(path).filename().string());
}

std::vector<std::string> expand_corpus(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    if (!fs::exists(p) && is_glob(p)) {
      for (const auto& m : glob_matches(p)) {
        if (fs::is_directory(m))
          add_directory(m, out);
        else if (has_trace_extension(m))
          out.push_back(m);
      }
    } else {
      add_path(p, out);
    }
  }
  for (auto& p : out) p = fs::path(p).lexically_normal().string();
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.empty()) throw std::invalid_argument("no trace files to compare");
  return out;
}

}  // namespace fraglab
