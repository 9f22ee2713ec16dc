// AtomicFile: writes go to a temporary file beside the target, which is renamed over
// the target only on commit(). A failed or interrupted write never leaves a partial
// file that looks complete; the temporary is removed when the object dies uncommitted.
#pragma once

#include <cstdio>
#include <string>

namespace fraglab {

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
  std::string path_, temp_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

// Reads a whole file (throws FormatError naming the file when it cannot).
std::string read_file(const std::string& path);

}  // namespace fraglab
