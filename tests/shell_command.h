// Runs a shell command line in a test and returns its exit code and standard output (the command line
// redirects stderr where a test reads it: `2>&1`).
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace fraglab::test {

struct CliResult {
  int code;
  std::string output;
};

inline CliResult run_shell(const std::string& command) {
  FILE* f = popen(command.c_str(), "r");
  REQUIRE(f);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace fraglab::test
