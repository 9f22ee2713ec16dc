// How much memory a reader may build from one input (docs/limits.md): decompression bombs
// (gzip, the native meta), alias bombs (a pickle that references one object many times) and
// JSON nesting are refused with a FormatError naming the file and the offset, long before
// they exhaust memory.
//
// One rule for every reader: an input may grow to `ratio` times its size on disk, and always
// to at least `floor_bytes`. Real traces stay far below it (the bundled snapshots inflate
// 9-14x; their stack text is a fraction of the file), a bomb (gzip reaches ~1000x, memo
// references far more) is stopped within a few hundred MB. `fraglab --max-expansion` raises
// it for the whole process.
#pragma once

#include <cstdint>

namespace fraglab {

struct ReadLimits {
  uint64_t ratio = 64;  // 0: unlimited
  uint64_t floor_bytes = uint64_t{64} << 20;

  // The most bytes an input of `input_bytes` on disk may grow into (saturating).
  uint64_t budget(uint64_t input_bytes) const {
    if (ratio == 0) return UINT64_MAX;
    uint64_t scaled = input_bytes > UINT64_MAX / ratio ? UINT64_MAX : input_bytes * ratio;
    return scaled > floor_bytes ? scaled : floor_bytes;
  }
  bool unlimited() const { return ratio == 0; }
};

// The process-wide limits (set once, by the CLI, before any reader runs).
const ReadLimits& read_limits();
void set_read_limits(const ReadLimits& limits);

// How the limit is named in errors, so the message says how to raise it.
inline constexpr const char* kRaiseLimitHint = "raise the limit with `fraglab --max-expansion N` (docs/limits.md)";

// The largest allocation or segment size a trace may hold: 2^48 bytes (256 TiB), the simulated
// device's address space and the most PyTorch's block addresses hold. Larger sizes are
// corrupt input, refused by every reader (and writer) rather than failing in a policy.
inline constexpr uint64_t kMaxEventBytes = uint64_t{1} << 48;

// JSON nesting deeper than this is refused (traces need 4 levels; the DOM of deeper, hostile
// nesting costs far more memory than its text).
inline constexpr int kMaxJsonDepth = 32;

}  // namespace fraglab
