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
#include "traces/populate_pages.h"

namespace fraglab {

namespace detail {
std::function<void()> g_after_read_chunk;
}  // namespace detail

FileBytes::FileBytes(const std::string& path) : FileBytes(path, false) {
  read_all();
  if (ready_.load() == kFailed) throw_failure();
}

std::unique_ptr<FileBytes> FileBytes::start_reading(const std::string& path) {
  std::unique_ptr<FileBytes> file(new FileBytes(path, true));
  file->reading_.start([f = file.get()] { f->read_all(); });  // no thread to be had: read now
  return file;
}

FileBytes::FileBytes(const std::string& path, bool) : path_(path) {
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd_ < 0) throw FormatError::in_file(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd_);
    throw FormatError::in_file(path, "not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  mtime_sec_ = st.st_mtim.tv_sec;
  mtime_nsec_ = st.st_mtim.tv_nsec;
  if (size_ > 0) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      close(fd_);
      throw FormatError::in_file(path, std::string("cannot hold it in memory: ") + std::strerror(errno));
    }
    data_ = static_cast<char*>(p);
  }
}

// Published a MiB at a time, as the inflating reader does (traces/io/gzip.h): often enough for the
// parser never to wait long, rarely enough that the wake-ups cost nothing.
void FileBytes::read_all() {
  auto fail = [&](size_t at, std::string text, bool has_offset) {
    close(fd_);
    fd_ = -1;
    failed_at_ = at;
    failure_ = std::move(text);
    failure_has_offset_ = has_offset;
    ready_.store(kFailed, std::memory_order_release);
    ready_.notify_all();
  };
  size_t got = 0;
  PopulateAhead pages(data_, size_);
  while (got < size_) {
    if (stop_.load(std::memory_order_relaxed)) return fail(got, "reading stopped", true);
    const size_t want = std::min<size_t>(size_ - got, size_t{1} << 20);
    pages.before_writing(got + want);
    ssize_t n = read(fd_, data_ + got, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(got, std::string("read error: ") + std::strerror(errno), true);
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (detail::g_after_read_chunk) detail::g_after_read_chunk();
    if (got < size_) {
      ready_.store(got, std::memory_order_release);
      ready_.notify_all();
    }
  }
  struct stat after {};
  bool changed = got != size_ || fstat(fd_, &after) != 0 || static_cast<size_t>(after.st_size) != size_ ||
                 after.st_mtim.tv_sec != mtime_sec_ || after.st_mtim.tv_nsec != mtime_nsec_;
  if (changed)
    return fail(got,
                fmt::format("the file changed while being read ({} bytes when opened, {} read); "
                            "read it again once it is written",
                            size_, got),
                false);
  close(fd_);
  fd_ = -1;
  ready_.store(size_, std::memory_order_release);  // all of it, checked: only now is the last MiB ready
  ready_.notify_all();
}

void FileBytes::throw_failure() const {
  if (failure_has_offset_) throw FormatError::at_offset(path_, failed_at_, failure_);
  throw FormatError::in_file(path_, failure_);
}

size_t FileBytes::wait_beyond(size_t have) {
  for (;;) {
    size_t r = ready_.load(std::memory_order_acquire);
    if (r == kFailed) throw_failure();
    if (r > have || r == size_) return r;
    ready_.wait(r, std::memory_order_acquire);
  }
}

void FileBytes::finish() {
  while (wait_beyond(size_) < size_) {
  }
  reading_.join();
}

FileBytes::~FileBytes() {
  stop_ = true;
  reading_.join();  // before the buffer and the descriptor go
  if (fd_ >= 0) close(fd_);
  if (data_) munmap(data_, size_);
}

}  // namespace fraglab
