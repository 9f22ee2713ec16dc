#include "allocators/detail/pytorch_config.h"

#include <algorithm>
#include <bit>
#include <string_view>
#include <vector>

#include "allocators/policy_options.h"

namespace fraglab::detail {

namespace {

constexpr uint64_t kLargeBuffer = 20 * kMiB;

[[noreturn]] void reject(const std::string& what) { throw PolicyConfigError("PYTORCH_CUDA_ALLOC_CONF: " + what); }

// AllocatorConfig::lexArgs: separators ',' ':' '[' ']' are tokens of their own; spaces vanish.
std::vector<std::string> lex(const std::string& env) {
  std::vector<std::string> tokens;
  std::string buf;
  for (char c : env) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!buf.empty()) tokens.push_back(std::move(buf));
      buf.clear();
      tokens.emplace_back(1, c);
    } else if (c != ' ') {
      buf += c;
    }
  }
  if (!buf.empty()) tokens.push_back(std::move(buf));
  return tokens;
}

void consume(const std::vector<std::string>& t, size_t i, char c) {
  if (i >= t.size() || t[i] != std::string(1, c))
    reject(std::string("Error parsing CachingAllocator::AllocatorConfig settings, expected ") + c);
}

// std::stoi / stoul / stod as PyTorch calls them: a leading number, the rest ignored;
// no number at all is an error.
int64_t to_int(const std::string& s, const char* what) {
  try {
    return std::stoll(s);
  } catch (const std::exception&) {
    reject(std::string("expected a number for ") + what + ", got '" + s + "'");
  }
}
double to_double(const std::string& s, const char* what) {
  try {
    return std::stod(s);
  } catch (const std::exception&) {
    reject(std::string("expected a number for ") + what + ", got '" + s + "'");
  }
}

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }
size_t log2_floor(uint64_t v) { return 63 - static_cast<size_t>(std::countl_zero(v)); }

// parseMaxSplitSize / parseMaxNonSplitRoundingSize: megabytes, at least kLargeBuffer.
size_t parse_mb_at_least_20(const std::vector<std::string>& t, size_t i, const char* key, uint64_t& out) {
  consume(t, ++i, ':');
  if (++i >= t.size()) reject(std::string("Error, expecting ") + key + " value");
  int64_t v = to_int(t[i], key);
  if (v < static_cast<int64_t>(kLargeBuffer / kMiB))
    reject(std::string("CachingAllocator option ") + key + " too small, must be >= 20");
  uint64_t mb = std::min<uint64_t>(static_cast<uint64_t>(v), UINT64_MAX / kMiB);
  out = mb * kMiB;
  return i;
}

size_t parse_true_false(const std::vector<std::string>& t, size_t i, const char* key, bool& out) {
  consume(t, ++i, ':');
  ++i;
  if (i >= t.size() || (t[i] != "True" && t[i] != "False"))
    reject(std::string("Expected a single True/False argument for ") + key);
  out = t[i] == "True";
  return i;
}

size_t parse_roundup(const std::vector<std::string>& t, size_t i,
                     std::array<uint64_t, kRoundUpPowerOfTwoIntervals>& div) {
  consume(t, ++i, ':');
  if (++i >= t.size()) reject("Error, expecting roundup_power2_divisions value");
  if (t[i] != "[") {  // the scalar form: every interval
    int64_t v = to_int(t[i], "roundup_power2_divisions");
    if (v <= 0 || !is_pow2(static_cast<uint64_t>(v))) reject("For roundups, the divisons has to be power of 2 ");
    div.fill(static_cast<uint64_t>(v));
    return i;
  }
  bool first_value = true;
  size_t last_index = 0;
  while (++i < t.size() && t[i] != "]") {
    const std::string& interval = t[i];
    consume(t, ++i, ':');
    if (++i >= t.size()) reject("Error parsing roundup_power2_divisions value");
    int64_t v = to_int(t[i], "roundup_power2_divisions");
    if (v < 0 || (v != 0 && !is_pow2(static_cast<uint64_t>(v))))
      reject("For roundups, the divisons has to be power of 2 or 0 to disable roundup ");
    auto divisions = static_cast<uint64_t>(v);
    if (interval == ">") {
      // From the last named interval (inclusive, as PyTorch does) to the end.
      std::fill(div.begin() + static_cast<ptrdiff_t>(last_index), div.end(), divisions);
    } else {
      int64_t mb = to_int(interval, "roundup_power2_divisions interval");
      if (mb <= 0 || !is_pow2(static_cast<uint64_t>(mb))) reject("For roundups, the intervals have to be power of 2 ");
      size_t index = std::min(log2_floor(static_cast<uint64_t>(mb)), div.size() - 1);
      if (first_value) {
        std::fill(div.begin(), div.begin() + static_cast<ptrdiff_t>(index), divisions);
        first_value = false;
      }
      div[index] = divisions;
      last_index = index;
    }
    if (i + 1 >= t.size()) reject("Error parsing roundup_power2_divisions: missing ']'");
    if (t[i + 1] != "]") consume(t, ++i, ',');
  }
  if (i >= t.size()) reject("Error parsing roundup_power2_divisions: missing ']'");
  return i;
}

}  // namespace

PytorchAllocatorConfig PytorchAllocatorConfig::parse(const std::string& conf) {
  PytorchAllocatorConfig c;
  c.apply(conf);
  return c;
}

void PytorchAllocatorConfig::apply(const std::string& conf) {
  std::vector<std::string> t = lex(conf);
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string& key = t[i];
    if (key == "max_split_size_mb") {
      i = parse_mb_at_least_20(t, i, "max_split_size_mb", max_split_size);
    } else if (key == "max_non_split_rounding_mb") {
      i = parse_mb_at_least_20(t, i, "max_non_split_rounding_mb", max_non_split_rounding_size);
    } else if (key == "garbage_collection_threshold") {
      consume(t, ++i, ':');
      if (++i >= t.size()) reject("Error, expecting garbage_collection_threshold value");
      double v = to_double(t[i], "garbage_collection_threshold");
      if (!(v > 0 && v < 1.0)) reject("garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
      garbage_collection_threshold = v;
    } else if (key == "roundup_power2_divisions") {
      i = parse_roundup(t, i, roundup_power2_divisions);
    } else if (key == "expandable_segments") {
      i = parse_true_false(t, i, "expandable_segments", expandable_segments);
    } else if (key == "backend") {
      consume(t, ++i, ':');
      if (++i >= t.size()) reject("Error parsing allocator backend value");
      if (t[i] == "cudaMallocAsync")
        reject("backend:cudaMallocAsync is the CUDA driver's allocator, which the pytorch policy does not model");
      if (t[i] != "native") reject("Unknown allocator backend, options are native and cudaMallocAsync");
    } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
               key == "pinned_use_background_threads") {
      bool ignored = false;  // locking and pinned host memory: no effect on device placement
      i = parse_true_false(t, i, key.c_str(), ignored);
    } else if (key == "pinned_num_register_threads") {
      consume(t, ++i, ':');
      if (++i >= t.size()) reject("Error, expecting pinned_num_register_threads value");
      to_int(t[i], "pinned_num_register_threads");
    } else {
      reject("Unrecognized CachingAllocator option: " + key);
    }
    if (i + 1 < t.size()) consume(t, ++i, ',');
  }
}

RecordedConf recorded_conf(const std::map<std::string, std::string>& settings) {
  for (const char* variable : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"})
    if (auto it = settings.find(variable); it != settings.end()) return {variable, &it->second};
  return {};
}

void PytorchAllocatorConfig::apply_recorded(const std::map<std::string, std::string>& settings) {
  // The text the process started with; a program may also have changed settings later
  // (torch.cuda.memory._set_allocator_settings), which the parsed values below reflect.
  if (RecordedConf conf = recorded_conf(settings)) {
    *this = PytorchAllocatorConfig{};
    apply(*conf.text);
  }
  auto get = [&](const char* key) -> const std::string* {
    auto it = settings.find(key);
    return it == settings.end() || it->second.empty() ? nullptr : &it->second;
  };
  auto bad = [](const char* key, const std::string& v) {
    throw PolicyConfigError(std::string("recorded allocator setting ") + key + " = '" + v + "' is not valid");
  };
  if (auto v = get("max_split_size")) {
    int64_t n = 0;
    try {
      n = std::stoll(*v);
    } catch (const std::exception&) {
      bad("max_split_size", *v);
    }
    max_split_size = n < 0 ? UINT64_MAX : static_cast<uint64_t>(n);  // -1 = unset
  }
  if (auto v = get("garbage_collection_threshold")) {
    try {
      garbage_collection_threshold = std::stod(*v);
    } catch (const std::exception&) {
      bad("garbage_collection_threshold", *v);
    }
  }
  if (auto v = get("expandable_segments")) {
    if (*v == "True" || *v == "true" || *v == "1")
      expandable_segments = true;
    else if (*v == "False" || *v == "false" || *v == "0")
      expandable_segments = false;
    else
      bad("expandable_segments", *v);
  }
  // roundup_power2_divisions is a dict {interval start in MiB: divisions}; the snapshot
  // reader flattens it to keys "roundup_power2_divisions.<MiB>".
  const std::string prefix = "roundup_power2_divisions.";
  for (auto it = settings.lower_bound(prefix); it != settings.end() && it->first.starts_with(prefix); ++it) {
    const std::string interval = it->first.substr(prefix.size());
    uint64_t mb = 0, divisions = 0;
    try {
      mb = std::stoull(interval);
      divisions = std::stoull(it->second);
    } catch (const std::exception&) {
      bad(it->first.c_str(), it->second);
    }
    if (!is_pow2(mb) || (divisions != 0 && !is_pow2(divisions))) bad(it->first.c_str(), it->second);
    roundup_power2_divisions[std::min(log2_floor(mb), kRoundUpPowerOfTwoIntervals - 1)] = divisions;
  }
}

std::string PytorchAllocatorConfig::to_conf() const {
  std::string out;
  auto add = [&](const std::string& item) { out += (out.empty() ? "" : ",") + item; };
  if (expandable_segments) add("expandable_segments:True");
  if (max_split_size != UINT64_MAX) add("max_split_size_mb:" + std::to_string(max_split_size / kMiB));
  if (max_non_split_rounding_size != kLargeBuffer)
    add("max_non_split_rounding_mb:" + std::to_string(max_non_split_rounding_size / kMiB));
  if (garbage_collection_threshold > 0) {
    std::string g = std::to_string(garbage_collection_threshold);
    while (g.size() > 1 && g.back() == '0') g.pop_back();
    add("garbage_collection_threshold:" + g);
  }
  const auto& d = roundup_power2_divisions;
  if (std::any_of(d.begin(), d.end(), [](uint64_t v) { return v != 0; })) {
    if (std::all_of(d.begin(), d.end(), [&](uint64_t v) { return v == d[0]; })) {
      add("roundup_power2_divisions:" + std::to_string(d[0]));
    } else {
      std::string list;
      for (size_t i = 0; i < d.size(); ++i)
        list += (i ? "," : "") + std::to_string(1ull << i) + ":" + std::to_string(d[i]);
      add("roundup_power2_divisions:[" + list + "]");
    }
  }
  return out;
}

}  // namespace fraglab::detail
