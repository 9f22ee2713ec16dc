// PyTorch's own counters for each bundled snapshot (tests/data/snapshots/stats.jsonl), by file name.
#pragma once

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace fraglab::test {

inline std::map<std::string, nlohmann::json> snapshot_stats(const std::string& dir) {
  std::map<std::string, nlohmann::json> out;
  std::ifstream in(dir + "/stats.jsonl");
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) {
      auto j = nlohmann::json::parse(line);
      out[j.at("file").get<std::string>()] = j;
    }
  return out;
}

}  // namespace fraglab::test
