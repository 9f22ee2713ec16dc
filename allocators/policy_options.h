// Policy option strings: `name:key=value,key=value`, also in PYTORCH_CUDA_ALLOC_CONF's
// own `key:value` syntax (`pytorch:expandable_segments:True,max_split_size_mb:128`);
// brackets group a value with commas in it (`roundup_power2_divisions:[256:1,>:8]`).
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "traces/units.h"  // parse_size, format_size: options take sizes

namespace fraglab {

// Bad policy name, option or value: a user error (exit 2), not a bug.
class PolicyConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The largest size any option takes: the simulated device's address space (2^48 bytes, what
// PyTorch's block addresses and every GPU's virtual address space fit in). Larger values are
// refused where they are given rather than failing deep inside a policy.
constexpr uint64_t kMaxOptionBytes = uint64_t{1} << 48;
// Alignments and granularities above this are nonsense for a GPU allocator.
constexpr uint64_t kMaxOptionAlign = uint64_t{1} << 30;

struct OptionSpec {
  std::string key;
  std::string default_value;
  std::string help;
};

class PolicyOptions {
 public:
  // Parses "k=v,k:v,k:[a,b]". Throws PolicyConfigError on malformed text.
  static PolicyOptions parse(const std::string& text);

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  void set(const std::string& key, const std::string& value) { values_[key] = value; }
  const std::map<std::string, std::string>& values() const { return values_; }

  // Typed getters; the default applies when the key is absent. Bad values throw
  // PolicyConfigError naming the key.
  std::string get_string(const std::string& key, const std::string& def) const;
  // Sizes accept units (2MiB, 512KB) and must not exceed `max`.
  uint64_t get_size(const std::string& key, uint64_t def, uint64_t max = kMaxOptionBytes) const;
  // Integers must lie in [min, max].
  int64_t get_int(const std::string& key, int64_t def, int64_t min = INT64_MIN, int64_t max = INT64_MAX) const;
  double get_double(const std::string& key, double def) const;
  bool get_bool(const std::string& key, bool def) const;

  // Throws PolicyConfigError when a key is not among `specs`.
  void check_known(const std::string& policy, const std::vector<OptionSpec>& specs) const;
  // The canonical text form (keys sorted), "" when empty.
  std::string to_string() const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace fraglab
