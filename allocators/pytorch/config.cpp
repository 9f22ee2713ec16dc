#include "allocators/pytorch/config.h"

#include <algorithm>
#include <bit>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "allocators/policy_options.h"
#include "traces/formats/pytorch/settings_inference.h"

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

// ConfigTokenizer::toBool: exactly True or False.
bool to_bool(const std::vector<std::string>& t, size_t i) {
  if (i >= t.size() || (t[i] != "True" && t[i] != "False"))
    reject("Expected 'True' or 'False' at index " + std::to_string(i) + " in ConfigTokenizer but got '" +
           (i < t.size() ? t[i] : std::string()) + "'");
  return t[i] == "True";
}

// The value token after `key:`.
const std::string& value_of(const std::vector<std::string>& t, size_t& i, const char* key) {
  consume(t, ++i, ':');
  if (++i >= t.size()) reject(std::string("Error, expecting ") + key + " value");
  return t[i];
}

// parseMaxSplitSize / parseMaxNonSplitRoundingSize: megabytes, at least the large segment size.
void parse_mb_at_least_large_segment(const std::vector<std::string>& t, size_t& i, const char* key,
                                     uint64_t large_segment_size, uint64_t& out) {
  const int64_t v = to_int(value_of(t, i, key), key);
  const int64_t least = static_cast<int64_t>(large_segment_size / kMiB);
  if (v < least)
    reject(std::string("CachingAllocator option ") + key + " too small, must be >= " + std::to_string(least));
  out = std::min<uint64_t>(static_cast<uint64_t>(v), UINT64_MAX / kMiB) * kMiB;
}

void parse_roundup(const std::vector<std::string>& t, size_t& i,
                   std::array<uint64_t, kRoundUpPowerOfTwoIntervals>& div) {
  if (value_of(t, i, "roundup_power2_divisions") != "[") {  // the scalar form: every interval
    int64_t v = to_int(t[i], "roundup_power2_divisions");
    if (v <= 0 || !is_pow2(static_cast<uint64_t>(v))) reject("For roundups, the divisions has to be power of 2 ");
    div.fill(static_cast<uint64_t>(v));
    return;
  }
  bool first_value = true;
  size_t last_index = 0;
  while (++i < t.size() && t[i] != "]") {
    const std::string& interval = t[i];
    consume(t, ++i, ':');
    if (++i >= t.size()) reject("Error parsing roundup_power2_divisions value");
    int64_t v = to_int(t[i], "roundup_power2_divisions");
    if (v < 0 || (v != 0 && !is_pow2(static_cast<uint64_t>(v))))
      reject("For roundups, the divisions has to be power of 2 or 0 to disable roundup ");
    auto divisions = static_cast<uint64_t>(v);
    if (interval == ">") {
      // The intervals after the last named one (PyTorch 2.11 fills from last_index + 1; before, from
      // last_index, overwriting the named interval's value).
      std::fill(div.begin() + static_cast<ptrdiff_t>(std::min(last_index + 1, div.size())), div.end(), divisions);
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
    if (i + 1 >= t.size()) reject("Expected closing bracket ']' in ConfigTokenizer but reached end of config");
    if (t[i + 1] != "]") consume(t, ++i, ',');
  }
  if (i >= t.size()) reject("Expected closing bracket ']' in ConfigTokenizer but reached end of config");
}

// ConfigTokenizer::skipKey: past `key:value` or `key:[...]`.
void skip_key(const std::vector<std::string>& t, size_t& i) {
  consume(t, ++i, ':');
  if (++i >= t.size()) return;
  if (t[i] == "[")
    while (i < t.size() && t[i] != "]") ++i;
}

using Tokens = std::vector<std::string>;
using KeyParser = void (*)(const Tokens&, size_t&, PytorchAllocatorConfig&);

// `key:True` or `key:False`.
bool bool_value(const Tokens& t, size_t& i) {
  consume(t, ++i, ':');
  return to_bool(t, ++i);
}
// A key whose value moves no block the trace does not show (locking, pinned host memory, graph capture's
// stream reuse): checked, dropped.
void check_bool(const Tokens& t, size_t& i, PytorchAllocatorConfig&) { bool_value(t, i); }

// PyTorch 2.11's keys (c10/core/AllocatorConfig.cpp AcceleratorAllocatorConfig::parseArgs, and
// c10/cuda/CUDAAllocatorConfig.cpp CUDAAllocatorConfig::parseArgs for the CUDA ones), each with its
// checks. Keys for pinned host memory and locking are checked and dropped: they change no device
// placement.
struct KeyRule {
  const char* key;
  KeyParser parse;
};
constexpr KeyRule kKeys[] = {
    // Read in a first pass (max_split_size_mb's least value is this size); skipped in the second.
    {"large_segment_size_mb", [](const Tokens& t, size_t& i, PytorchAllocatorConfig&) { skip_key(t, i); }},
    {"max_split_size_mb",
     [](const Tokens& t, size_t& i, PytorchAllocatorConfig& c) {
       parse_mb_at_least_large_segment(t, i, "max_split_size_mb", c.large_segment_size, c.max_split_size);
     }},
    {"max_non_split_rounding_mb",
     [](const Tokens& t, size_t& i, PytorchAllocatorConfig& c) {
       parse_mb_at_least_large_segment(t, i, "max_non_split_rounding_mb", c.large_segment_size,
                                       c.max_non_split_rounding_size);
     }},
    {"garbage_collection_threshold",
     [](const Tokens& t, size_t& i, PytorchAllocatorConfig& c) {
       const double v = to_double(value_of(t, i, "garbage_collection_threshold"), "garbage_collection_threshold");
       if (!(v > 0 && v < 1.0)) reject("garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
       c.garbage_collection_threshold = v;
     }},
    {"roundup_power2_divisions",
     [](const Tokens& t, size_t& i, PytorchAllocatorConfig& c) { parse_roundup(t, i, c.roundup_power2_divisions); }},
    {"expandable_segments",
     [](const Tokens& t, size_t& i, PytorchAllocatorConfig& c) { c.expandable_segments = bool_value(t, i); }},
    {"backend",
     [](const Tokens& t, size_t& i, PytorchAllocatorConfig&) {
       const std::string& v = value_of(t, i, "backend");
       if (v == "cudaMallocAsync")
         reject("backend:cudaMallocAsync is the CUDA driver's allocator, which the pytorch policy does not model");
       if (v != "native") reject("Unknown allocator backend, options are native and cudaMallocAsync");
     }},
    // A limit set from the settings, as set_per_process_memory_fraction sets it (the device's capacity
    // stands for it: --capacity, or the one the recording shows).
    {"per_process_memory_fraction",
     [](const Tokens& t, size_t& i, PytorchAllocatorConfig& c) {
       const double v = to_double(value_of(t, i, "per_process_memory_fraction"), "per_process_memory_fraction");
       if (!(v >= 0.0 && v <= 1.0)) reject("per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
       c.per_process_memory_fraction = v;
     }},
    // Recorded in the trace itself: a block freed during a capture is reused once its free completes.
    {"graph_capture_record_stream_reuse", check_bool},
    {"release_lock_on_cudamalloc", check_bool},
    {"release_lock_on_hipmalloc", check_bool},
    {"pinned_use_cuda_host_register", check_bool},
    {"pinned_use_hip_host_register", check_bool},
    {"pinned_use_background_threads", check_bool},
    {"pinned_num_register_threads",
     [](const Tokens& t, size_t& i, PytorchAllocatorConfig&) {
       const int64_t v = to_int(value_of(t, i, "pinned_num_register_threads"), "pinned_num_register_threads");
       if (v <= 0 || !is_pow2(static_cast<uint64_t>(v)))
         reject("Number of register threads has to be power of 2, got " + std::to_string(v));
     }},
    {"pinned_reserve_segment_size_mb",
     [](const Tokens& t, size_t& i, PytorchAllocatorConfig&) {
       if (to_int(value_of(t, i, "pinned_reserve_segment_size_mb"), "pinned_reserve_segment_size_mb") <= 0)
         reject("Pinned reserve segment size has to be greater than 0");
     }},
};

[[noreturn]] void bad(const char* key, const std::string& v) {
  throw PolicyConfigError(std::string("recorded allocator setting ") + key + " = '" + v + "' is not valid");
}

const KeyRule* rule_for(const std::string& key) {
  for (const KeyRule& r : kKeys)
    if (key == r.key) return &r;
  return nullptr;
}

}  // namespace

PytorchAllocatorConfig PytorchAllocatorConfig::parse(const std::string& conf) {
  PytorchAllocatorConfig c;
  c.apply(conf);
  return c;
}

void PytorchAllocatorConfig::apply(const std::string& conf, std::vector<std::string>* unknown_keys) {
  const Tokens t = lex(conf);
  // large_segment_size_mb first: the least max_split_size_mb and max_non_split_rounding_mb are this size,
  // and a new large segment size resets max_non_split_rounding_mb to it.
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] == "large_segment_size_mb") {
      const int64_t v = to_int(value_of(t, i, "large_segment_size_mb"), "large_segment_size_mb");
      if (v <= static_cast<int64_t>(kMinLargeAllocMb))
        reject("CachingAllocator option large_segment_size_mb must be > " + std::to_string(kMinLargeAllocMb) + " MB");
      large_segment_size = std::min<uint64_t>(static_cast<uint64_t>(v), UINT64_MAX / kMiB) * kMiB;
      max_non_split_rounding_size = large_segment_size;
    }
  for (size_t i = 0; i < t.size(); ++i) {
    if (const KeyRule* rule = rule_for(t[i])) {
      rule->parse(t, i, *this);
    } else if (unknown_keys && t[i] != ",") {
      unknown_keys->push_back(t[i]);  // a key of a later PyTorch: the recording accepted it
      skip_key(t, i);
    } else {
      reject("Unrecognized key '" + t[i] + "' in CUDA allocator config.");
    }
    if (i + 1 < t.size()) consume(t, ++i, ',');
  }
}

RecordedConf recorded_conf(const std::map<std::string, std::string>& settings) {
  for (const char* variable : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"})
    if (auto it = settings.find(variable); it != settings.end()) return {variable, &it->second};
  return {};
}

void PytorchAllocatorConfig::apply_recorded(const std::map<std::string, std::string>& settings,
                                            std::vector<std::string>* unknown_keys) {
  // The text the process started with; a program may also have changed settings later
  // (torch.cuda.memory._set_allocator_settings), which the parsed values below reflect. The recording's
  // PyTorch accepted the text: a key this model does not know is skipped, not refused.
  if (RecordedConf conf = recorded_conf(settings)) {
    *this = PytorchAllocatorConfig{};
    std::vector<std::string> unknown;
    apply(*conf.text, &unknown);
    if (unknown_keys) *unknown_keys = std::move(unknown);
  }
  auto get = [&](const char* key) -> const std::string* {
    auto it = settings.find(key);
    return it == settings.end() || it->second.empty() ? nullptr : &it->second;
  };
  // A recorded number, or bad input named as the setting it came from.
  auto number = [](const char* key, const std::string& v, auto parse) {
    try {
      return parse(v);
    } catch (const std::exception&) {
      bad(key, v);
    }
  };
  const auto integer = [](const std::string& v) { return std::stoll(v); };
  // Not a key PyTorch writes: the large segment size the device calls showed where the text no longer names
  // it (traces/formats/pytorch/settings_inference.h, note_large_segment_size); max_non_split_rounding_mb follows it
  // unless the text gives one, as parseArgs resets it to the large segment size.
  if (auto v = get(kNotedLargeSegmentSize)) {
    const int64_t bytes = number(kNotedLargeSegmentSize, *v, integer);
    if (bytes <= static_cast<int64_t>(kMinLargeAllocMb * kMiB)) bad(kNotedLargeSegmentSize, *v);
    const RecordedConf conf = recorded_conf(settings);
    if (!conf || conf.text->find("max_non_split_rounding_mb") == std::string::npos)
      max_non_split_rounding_size = static_cast<uint64_t>(bytes);
    large_segment_size = static_cast<uint64_t>(bytes);
  }
  if (auto v = get("max_split_size")) {
    const int64_t n = number("max_split_size", *v, integer);
    max_split_size = n < 0 ? UINT64_MAX : static_cast<uint64_t>(n);  // -1 = unset
  }
  if (auto v = get("garbage_collection_threshold"))
    garbage_collection_threshold =
        number("garbage_collection_threshold", *v, [](const std::string& x) { return std::stod(x); });
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
  if (large_segment_size != kLargeBuffer) add("large_segment_size_mb:" + std::to_string(large_segment_size / kMiB));
  if (max_non_split_rounding_size != large_segment_size)
    add("max_non_split_rounding_mb:" + std::to_string(max_non_split_rounding_size / kMiB));
  if (garbage_collection_threshold > 0) {
    std::string g = std::to_string(garbage_collection_threshold);
    while (g.size() > 1 && g.back() == '0') g.pop_back();
    add("garbage_collection_threshold:" + g);
  }
  if (per_process_memory_fraction) add(fmt::format("per_process_memory_fraction:{}", *per_process_memory_fraction));
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
