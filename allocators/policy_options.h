// Policy option strings: `name:key=value,key=value`, also in PYTORCH_CUDA_ALLOC_CONF's
// own `key:value` syntax (`pytorch:expandable_segments:True,max_split_size_mb:128`);
// brackets group a value with commas in it (`roundup_power2_divisions:[256:1,>:8]`).
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
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

// Typed option declarations. A policy declares each of its options once, as a constant:
//   constexpr SizeOption kArena{"arena", 32ull << 20, "arena size requested from the device"};
// The getter (PolicyOptions::get) returns its default and `fraglab policies` prints it
// (OptionSpec), so the two cannot disagree. Bounds are checked where the value is read.
struct SizeOption {  // bytes; values accept units (2MiB, 512KB)
  std::string_view key;
  uint64_t default_value;
  std::string_view help;
  uint64_t max = kMaxOptionBytes;
};
struct IntOption {
  std::string_view key;
  int64_t default_value;
  std::string_view help;
  int64_t min = INT64_MIN, max = INT64_MAX;
};
struct DoubleOption {
  std::string_view key;
  double default_value;
  std::string_view help;
};
struct BoolOption {
  std::string_view key;
  bool default_value;
  std::string_view help;
};
// An option handed on as text to a parser that owns its default (PyTorch's PYTORCH_CUDA_ALLOC_CONF
// keys, allocators/pytorch/config.h): `shown_default` is how that default reads.
struct TextOption {
  std::string_view key;
  std::string_view shown_default;
  std::string_view help;
};

// An option as listed (`fraglab policies`, the GUI): its default printed from the declaration.
struct OptionSpec {
  std::string key;
  std::string default_value;
  std::string help;

  OptionSpec(std::string key, std::string default_value, std::string help)
      : key(std::move(key)), default_value(std::move(default_value)), help(std::move(help)) {}
  OptionSpec(const SizeOption& o);  // NOLINT(google-explicit-constructor): lists of declarations read best
  OptionSpec(const IntOption& o);
  OptionSpec(const DoubleOption& o);
  OptionSpec(const BoolOption& o);
  OptionSpec(const TextOption& o);
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
  // The same, for a declared option: its default and bounds come from the declaration.
  uint64_t get(const SizeOption& o) const { return get_size(std::string(o.key), o.default_value, o.max); }
  int64_t get(const IntOption& o) const { return get_int(std::string(o.key), o.default_value, o.min, o.max); }
  double get(const DoubleOption& o) const { return get_double(std::string(o.key), o.default_value); }
  bool get(const BoolOption& o) const { return get_bool(std::string(o.key), o.default_value); }
  template <class Declared>
  requires requires(const Declared& o) { o.help; }
  bool has(const Declared& o) const { return has(std::string(o.key)); }

  // Throws PolicyConfigError when a key is not among `specs`.
  void check_known(const std::string& policy, const std::vector<OptionSpec>& specs) const;
  // The canonical text form (keys sorted), "" when empty.
  std::string to_string() const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace fraglab
