// ops_list.h: the plain op list `fraglab ops TRACE -o OPS` writes, read by the C++ reference
// runners (rmm_reference, async_reference, bench/torch_reference), which build on the GPU machine
// with nothing of fraglab's:
//   fraglab-ops 1
//   streams N H0 H1 ...        recorded stream handles; handle 0 is the default stream
//   a ID SIZE STREAM           allocate SIZE bytes on stream index STREAM as id ID
//   f ID                       free id ID
//   e                          empty the cache
// Lines starting with '#' are comments. Bad input: file:line and exit 2.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace peers {

struct Op {
  char kind = 0;  // 'a', 'f', 'e'
  uint32_t id = 0;
  uint64_t size = 0;
  uint32_t stream = 0;
};

struct OpList {
  std::vector<uint64_t> streams;
  std::vector<Op> ops;
};

[[noreturn]] inline void fail(const std::string& file, uint64_t line, const std::string& what) {
  std::cerr << file << ":" << line << ": " << what << "\n";
  std::exit(2);
}

inline OpList read_ops(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, 0, "cannot open");
  OpList list;
  std::string text;
  uint64_t line = 0;
  bool header = false;
  while (std::getline(in, text)) {
    ++line;
    if (text.empty() || text[0] == '#') continue;
    std::istringstream fields(text);
    std::string word;
    fields >> word;
    if (!header) {
      int version = 0;
      if (word != "fraglab-ops" || !(fields >> version) || version != 1) fail(path, line, "not a fraglab-ops 1 file");
      header = true;
      continue;
    }
    Op op;
    if (word == "streams") {
      size_t n = 0;
      if (!(fields >> n) || n > (1u << 20)) fail(path, line, "bad streams line");
      list.streams.resize(n);
      for (auto& h : list.streams)
        if (!(fields >> h)) fail(path, line, "bad stream handle");
      continue;
    }
    if (word == "a") {
      op.kind = 'a';
      if (!(fields >> op.id >> op.size >> op.stream)) fail(path, line, "bad alloc line");
      if (op.stream >= list.streams.size()) fail(path, line, "stream index out of range");
      if (op.id > (1u << 28)) fail(path, line, "allocation id out of range");
    } else if (word == "f") {
      op.kind = 'f';
      if (!(fields >> op.id)) fail(path, line, "bad free line");
    } else if (word == "e") {
      op.kind = 'e';
    } else {
      fail(path, line, "unknown op '" + word + "'");
    }
    list.ops.push_back(op);
  }
  if (!header) fail(path, line, "empty file");
  return list;
}

}  // namespace peers
