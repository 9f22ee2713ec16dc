#include "traces/io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "traces/io/format_error.h"

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

// Temporary outputs removed when SIGINT, SIGTERM or SIGHUP ends the process (an interrupted export
// must not leave its 76 MB temp file). The handler may only make async-signal-safe calls: the paths
// sit in fixed slots, and a directory is emptied with getdents64 and unlinkat.
constexpr size_t kTempSlots = 64;
struct TempSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 a file, 3 a directory
  char path[PATH_MAX];
};
std::array<TempSlot, kTempSlots> g_temps;
struct sigaction g_previous[3];
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

void empty_directory(const char* path) {
  int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  for (;;) {
    long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      struct Entry {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* entry = reinterpret_cast<const Entry*>(buf + at);
      const char* name = entry->name;
      if (!(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)))) ::unlinkat(fd, name, 0);
      at += entry->reclen;
    }
  }
  ::close(fd);
}

void remove_temps_on_signal(int sig) {
  for (TempSlot& slot : g_temps) {
    int state = slot.state.load();
    if (state == 2) ::unlink(slot.path);
    if (state == 3) {
      empty_directory(slot.path);
      ::rmdir(slot.path);
    }
  }
  for (size_t i = 0; i < 3; ++i)
    if (kSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  ::raise(sig);  // the previous disposition (by default: terminate with the signal)
}

// Installed whenever a temporary is registered and the handler is not ours (something may have set
// its own since: the previous one is kept and takes the signal after ours).
void install_handlers() {
  struct sigaction action {};
  action.sa_handler = remove_temps_on_signal;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < 3; ++i) {
    struct sigaction now {};
    ::sigaction(kSignals[i], nullptr, &now);
    if (now.sa_handler == SIG_IGN || now.sa_handler == remove_temps_on_signal) continue;  // nohup: stays ignored
    g_previous[i] = now;
    ::sigaction(kSignals[i], &action, nullptr);
  }
}

}  // namespace

TempPathGuard::TempPathGuard(const std::string& path, bool directory) {
  if (path.size() >= PATH_MAX) return;
  install_handlers();
  for (size_t i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (!g_temps[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_temps[i].path, path.c_str(), path.size() + 1);
    g_temps[i].state.store(directory ? 3 : 2);
    slot_ = static_cast<int>(i);
    return;
  }
}

TempPathGuard::~TempPathGuard() { release(); }

void TempPathGuard::release() {
  if (slot_ >= 0) g_temps[static_cast<size_t>(slot_)].state.store(0);
  slot_ = -1;
}

std::string temp_name_beside(const std::string& target) {
  static std::atomic<unsigned> counter{0};
  // Short whatever the target's name: a 253-character name plus ".tmp.PID" would pass NAME_MAX.
  std::string name = ".fraglab-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".tmp";
  size_t slash = target.rfind('/');
  return slash == std::string::npos ? name : target.substr(0, slash + 1) + name;
}

AtomicFile::AtomicFile(const std::string& path) : path_(path), target_(path) {
  struct stat st {};
  bool descriptor_link = false;
  if (::lstat(path.c_str(), &st) == 0) {
    descriptor_link = S_ISLNK(st.st_mode) && is_descriptor_link(path);
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
    // A device, FIFO or socket is written through; so is a link naming a descriptor, also on a file (/dev/stdout
    // with `> out.txt`): renaming over it replaced the /dev/stdout link itself.
    if (!S_ISREG(st.st_mode) || descriptor_link) target_.clear();
  }
  if (target_.empty()) {
    if (descriptor_link) std::fflush(nullptr);  // appended after what this process printed there already
    file_ = std::fopen(path.c_str(), descriptor_link ? "ab" : "wb");
    if (!file_) fail(errno);
    return;
  }
  temp_ = temp_name_beside(target_);
  guard_ = std::make_unique<TempPathGuard>(temp_, false);
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
  if (ok && guard_) guard_->release();  // renamed: nothing of ours left to remove
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
