// AtomicFile: writes go to a temporary file beside the target, which is renamed over
// the target only on commit(). A failed or interrupted write never leaves a partial
// file that looks complete; the temporary is removed when the object dies uncommitted.
//
// Only a regular file (or nothing) is ever replaced. A device, FIFO or socket at the path
// (/dev/full, /dev/stdout's pipe) is written through in place; a symlink to a regular file
// replaces its target and keeps the link; a directory is refused. Every write error, the
// final flush and close included, throws std::runtime_error naming the path.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

namespace fraglab {

// While alive, `path` (a temporary file, or a staging directory and the files in it) is removed if
// SIGINT, SIGTERM or SIGHUP ends the process; the signal then takes its previous course.
class TempPathGuard {
 public:
  TempPathGuard(const std::string& path, bool directory);
  ~TempPathGuard();
  TempPathGuard(const TempPathGuard&) = delete;
  TempPathGuard& operator=(const TempPathGuard&) = delete;
  void release();  // the path is no longer a temporary (renamed into place)

 private:
  int slot_ = -1;
};

// A short name for a temporary beside `target` (in its directory), unique in this process: the
// target's own name may be as long as NAME_MAX allows.
std::string temp_name_beside(const std::string& target);

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);  // throws std::runtime_error
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);  // throws std::runtime_error
  void write(const std::string& s) { write(s.data(), s.size()); }
  void commit();  // flush, close, rename into place

 private:
  [[noreturn]] void fail(int err) const;
  std::string path_;    // as given (named in errors)
  std::string target_;  // the file renamed over (a symlink's target), empty when written through
  std::string temp_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
  std::unique_ptr<TempPathGuard> guard_;
};

// Reads a whole regular file (throws FormatError naming the file when it cannot, or when the
// path is a directory, FIFO or device: a FIFO would block, a directory reads as empty).
std::string read_file(const std::string& path);

// Throws FormatError unless `path` is a regular file (or a symlink to one); never opens it.
void require_regular_file(const std::string& path);

}  // namespace fraglab
