// A file's bytes in memory, for readers that parse a whole file (the PyTorch snapshot importer).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "traces/background_task.h"

namespace fraglab {

// The whole file read into memory. Not a mapping: a snapshot truncated while it is read (a
// training loop re-dumping to the same name) would raise SIGBUS at the first page past the new end;
// read(2) sees the shorter file instead, and the reading stops with an error (issue 40).
class FileBytes {
 public:
  // Reads the whole file now.
  explicit FileBytes(const std::string& path);
  // Opens the file now (its errors thrown here) and reads it on a thread of its own, so a reader can parse
  // what is ready while the rest comes in: the copy out of the page cache and the page faults of a 200 MB
  // buffer (~0.1 s) are the other core's. bytes() is then the whole extent, written up to ready.
  static std::unique_ptr<FileBytes> start_reading(const std::string& path);
  ~FileBytes();  // stops and joins the reading thread, if any
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  std::string_view bytes() const { return {data_ ? data_ : "", size_}; }
  // Waits until more than `have` bytes are read, or all are; returns how many are. Throws the reading's
  // FormatError (a read error, a file that changed while read) once it has failed.
  size_t wait_beyond(size_t have);
  // Waits for the whole file; throws as wait_beyond does.
  void finish();

 private:
  FileBytes(const std::string& path, bool background);
  // Reads the file into the buffer, publishing progress; the error, if any, as FormatError's text.
  void read_all();
  [[noreturn]] void throw_failure() const;

  static constexpr size_t kFailed = SIZE_MAX;  // ready_'s value once the reading failed
  std::string path_;
  int fd_ = -1;
  char* data_ = nullptr;
  size_t size_ = 0;
  long long mtime_sec_ = 0, mtime_nsec_ = 0;  // when opened: a change while reading is an error
  std::atomic<size_t> ready_{0};
  std::atomic<bool> stop_{false};
  size_t failed_at_ = 0;  // the failure's offset (read after ready_ says kFailed)
  std::string failure_;   // its text; empty: no offset applies (the file changed)
  bool failure_has_offset_ = false;
  BackgroundTask reading_;  // start_reading's
};

namespace detail {
// Tests only: called after each chunk (1 MiB) of a file is read, to change the file while it is
// being read.
extern std::function<void()> g_after_read_chunk;
}  // namespace detail

}  // namespace fraglab
