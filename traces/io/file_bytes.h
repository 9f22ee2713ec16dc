// A file's bytes in memory, for readers that parse a whole file (the PyTorch snapshot importer).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace fraglab {

// The whole file read into memory. Not a mapping: a snapshot truncated while it is read (a
// training loop re-dumping to the same name) would raise SIGBUS at the first page past the new end;
// read(2) sees the shorter file instead, and the reading stops with an error (issue 40).
class FileBytes {
 public:
  explicit FileBytes(const std::string& path);
  ~FileBytes();
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  std::string_view bytes() const { return {data_ ? data_ : "", size_}; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

namespace detail {
// Tests only: called after each chunk (1 MiB) of a file is read, to change the file while it is
// being read.
extern std::function<void()> g_after_read_chunk;
}  // namespace detail

}  // namespace fraglab
