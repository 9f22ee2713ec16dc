#include "traces/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "traces/format_error.h"

namespace fraglab {

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Links under /dev and /proc (/dev/stdout, /dev/fd/N) name open descriptors: written through,
// never replaced by renaming over whatever they resolve to.
bool is_descriptor_link(const std::string& path) { return path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0; }

}  // namespace

AtomicFile::AtomicFile(const std::string& path) : path_(path), target_(path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode) && !is_descriptor_link(path)) {
      char resolved[PATH_MAX];
      if (!::realpath(path.c_str(), resolved))
        throw std::runtime_error("cannot write " + path + ": a symlink to a missing file (" + std::strerror(errno) +
                                 ")");
      target_ = resolved;
      if (::stat(target_.c_str(), &st) != 0) fail(errno);
    } else if (S_ISLNK(st.st_mode) && ::stat(path.c_str(), &st) != 0) {
      fail(errno);
    }
    if (S_ISDIR(st.st_mode)) throw std::runtime_error("cannot write " + path + ": it is a directory");
    if (!S_ISREG(st.st_mode)) target_.clear();  // a device, FIFO or socket: written through
  }
  if (target_.empty()) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) fail(errno);
    return;
  }
  temp_ = target_ + ".tmp." + std::to_string(::getpid());
  file_ = std::fopen(temp_.c_str(), "wb");
  if (!file_) fail(errno);
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (file_) std::fclose(file_);
  if (!temp_.empty()) std::remove(temp_.c_str());
}

void AtomicFile::fail(int err) const { throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(err)); }

void AtomicFile::write(const void* data, size_t size) {
  if (size && std::fwrite(data, 1, size, file_) != size) fail(errno);
}

void AtomicFile::commit() {
  bool ok = std::fflush(file_) == 0;
  int err = errno;
  if (std::fclose(file_) != 0 && ok) ok = false, err = errno;
  file_ = nullptr;
  if (ok && !temp_.empty() && std::rename(temp_.c_str(), target_.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    if (!temp_.empty()) std::remove(temp_.c_str());
    fail(err);
  }
  committed_ = true;
}

void require_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw FormatError::in_file(path, std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw FormatError::in_file(path, std::string("cannot read it: ") + file_kind(st.st_mode) + ", not a regular file");
}

std::string read_file(const std::string& path) {
  require_regular_file(path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw FormatError::in_file(path, std::string("cannot open: ") + std::strerror(errno));
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int err = errno;
      ::close(fd);
      throw FormatError::at_offset(path, out.size(), std::string("read error: ") + std::strerror(err));
    }
    if (got == 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return out;
}

}  // namespace fraglab
