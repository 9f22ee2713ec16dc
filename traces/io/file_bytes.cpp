#include "traces/io/file_bytes.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "traces/io/format_error.h"

namespace fraglab {

namespace detail {
std::function<void()> g_after_read_chunk;
}  // namespace detail

FileBytes::FileBytes(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd < 0) throw FormatError::in_file(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw FormatError::in_file(path, "not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      close(fd);
      throw FormatError::in_file(path, std::string("cannot hold it in memory: ") + std::strerror(errno));
    }
    data_ = static_cast<char*>(p);
  }
  size_t got = 0;
  while (got < size_) {
    ssize_t n = read(fd, data_ + got, std::min<size_t>(size_ - got, size_t{1} << 20));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      throw FormatError::at_offset(path, got, std::string("read error: ") + std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (detail::g_after_read_chunk) detail::g_after_read_chunk();
  }
  struct stat after {};
  bool changed = got != size_ || fstat(fd, &after) != 0 || after.st_size != st.st_size ||
                 after.st_mtim.tv_sec != st.st_mtim.tv_sec || after.st_mtim.tv_nsec != st.st_mtim.tv_nsec;
  close(fd);
  if (changed)
    throw FormatError::in_file(path, fmt::format("the file changed while being read ({} bytes when opened, {} read); "
                                                 "read it again once it is written",
                                                 size_, got));
}

FileBytes::~FileBytes() {
  if (data_) munmap(data_, size_);
}

}  // namespace fraglab
