#include "cli/stdin_input.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace fraglab::cli {

namespace {

std::string& stdin_file() {  // "/dev/stdin" once standard input was taken; "" before
  static std::string path;
  return path;
}

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::invalid_argument(fmt::format("-: cannot spool standard input: {}", std::strerror(errno)));
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Standard input copied into an unlinked temporary file; returns its descriptor.
int spool_stdin() {
  const char* dir = std::getenv("TMPDIR");
  std::string name = std::string(dir && *dir ? dir : "/tmp") + "/fraglab-stdin-XXXXXX";
  int fd = ::mkstemp(name.data());
  if (fd < 0)
    throw std::invalid_argument(
        fmt::format("-: cannot create a temporary file for standard input in {}: {} (set TMPDIR)",
                    name.substr(0, name.rfind('/')), std::strerror(errno)));
  ::unlink(name.c_str());
  std::vector<char> buffer(size_t{1} << 20);
  for (;;) {
    ssize_t n = ::read(STDIN_FILENO, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw std::invalid_argument(fmt::format("-: cannot read standard input: {}", std::strerror(error)));
    }
    if (n == 0) break;
    write_all(fd, buffer.data(), static_cast<size_t>(n));
  }
  return fd;
}

}  // namespace

std::string input_path(const std::string& path) {
  if (path != "-") return path;
  if (!stdin_file().empty()) throw std::invalid_argument("-: standard input is given twice (it can be read once)");
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) != 0)
    throw std::invalid_argument(fmt::format("-: no standard input: {}", std::strerror(errno)));
  // A regular file (`< file`) is read where it is, from its start; a pipe or terminal is copied first.
  if (!S_ISREG(st.st_mode)) {
    // The copy becomes standard input itself, so that the trace's name in outputs is /dev/stdin.
    const int fd = spool_stdin();
    if (::dup2(fd, STDIN_FILENO) < 0)
      throw std::invalid_argument(fmt::format("-: cannot read standard input: {}", std::strerror(errno)));
    ::close(fd);
  }
  stdin_file() = "/dev/stdin";  // opens the file anew, from its start, each time a reader opens it
  return stdin_file();
}

CLI::Option* dash_reads_stdin(CLI::Option* option) {
  option->description(option->get_description() + " ('-': standard input)");
  // Thrown as CLI11's own error: parsing reports it (exit 2) as it does a bad value of any option.
  return option->transform(
      [](std::string value) {
        try {
          return input_path(value);
        } catch (const std::invalid_argument& e) {
          throw CLI::ValidationError(e.what());
        }
      },
      "", "");
}

std::string name_stdin(std::string message) {
  const std::string& file = stdin_file();
  if (file.empty()) return message;
  for (size_t at = message.find(file); at != std::string::npos; at = message.find(file, at + 1))
    message.replace(at, file.size(), "-");
  return message;
}

}  // namespace fraglab::cli
