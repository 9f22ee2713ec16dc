// What every synthetic workload generator shares: a seeded random source, parsed
// distributions, and an EventSink that assigns dense ids and streams events to a writer.
//
// Generators are deterministic for a seed on every platform: the random source and the
// distributions are written here (std::normal_distribution and friends differ between
// standard libraries), and no generator reads the clock.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "traces/trace_io.h"

namespace fraglab::gen {

// xoshiro256** (Blackman and Vigna, https://prng.di.unimi.it/), seeded through splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Integer in [lo, hi].
  uint64_t between(uint64_t lo, uint64_t hi) { return lo + next() % (hi - lo + 1); }
  double normal();                  // Box-Muller
  double exponential(double mean);  // inverse CDF

 private:
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

// A distribution of positive values, from text:
//   fixed:V  uniform:LO:HI  lognormal:MEDIAN:SIGMA  powerlaw:MIN:MAX:ALPHA  exp:MEAN
// Values may carry size units when `sizes` is set ("lognormal:1MiB:1.5").
class Dist {
 public:
  enum class Kind { Fixed, Uniform, LogNormal, PowerLaw, Exponential };
  static Dist parse(const std::string& text, bool sizes);  // throws std::invalid_argument
  double sample(Rng& rng) const;
  // Mean, estimated by sampling with a fixed seed (clipping to [min, max] makes closed forms inexact).
  double mean() const;
  const std::string& text() const { return text_; }
  // The largest value the distribution is written to reach: fixed's V, uniform's HI, powerlaw's
  // MAX, lognormal's median, exp's mean (the last two have tails; callers clip samples).
  double largest() const;
  bool has_tail() const { return kind_ == Kind::LogNormal || kind_ == Kind::Exponential; }

 private:
  Kind kind_ = Kind::Fixed;
  double a_ = 0, b_ = 0, c_ = 0;
  std::string text_;
};

// Streams generated events to a writer, in chunks, with dense slot ids (trace.h's IdSlots)
// and the live requested bytes tracked (generators steer by them).
class EventSink {
 public:
  explicit EventSink(TraceWriter& writer) : writer_(writer) { buffer_.reserve(kChunk); }
  ~EventSink() = default;

  AllocId alloc(uint64_t size, StreamIndex stream = 0);
  void free(AllocId id);
  void empty_cache();
  void advance(int64_t us) { time_us_ += us; }  // simulated time passes
  void flush();

  int64_t time_us() const { return time_us_; }
  uint64_t live_bytes() const { return live_bytes_; }
  uint64_t events() const { return events_; }
  uint64_t size_of(AllocId id) const { return sizes_[id]; }

 private:
  void push(const Event& e) {
    buffer_.push_back(e);
    ++events_;
    if (buffer_.size() == kChunk) flush();
  }

  static constexpr size_t kChunk = 1 << 16;
  TraceWriter& writer_;
  std::vector<Event> buffer_;
  IdSlots slots_;
  std::vector<uint64_t> sizes_;  // requested bytes by live id
  uint64_t live_bytes_ = 0, events_ = 0;
  int64_t time_us_ = 0;
};

// Generator options are checked before anything is written (bad input exits 2, naming the
// option): each must be a number in [lo, hi]; NaN is never in range. Throws std::invalid_argument
// "gen KIND: --OPTION must be from LO to HI, not V".
void check_option(const char* kind, const char* option, double value, double lo, double hi);
void check_option(const char* kind, const char* option, uint64_t value, uint64_t lo, uint64_t hi);
void check_option(const char* kind, const char* option, int value, int lo, int hi);
// Dist::parse with the error prefixed by the command and option ("gen train: --seq: ...").
Dist parse_dist(const char* kind, const char* option, const std::string& text, bool sizes);
// A distribution option: its largest value at most `hi`.
void check_option(const char* kind, const char* option, const Dist& dist, double hi);

// What any generated allocation may be: the simulated device's address space (2^48 bytes).
constexpr double kMaxGenBytes = 281474976710656.0;
// Throws unless a tensor of `bytes` (computed in double, so without wrapping) fits kMaxGenBytes.
void check_bytes(const char* kind, const char* what, double bytes);

// A sample clipped to [lo, hi], NaN to lo: samples from tails and from extreme parameters stay
// in range before they become integers (a double beyond 2^64 has no uint64_t value).
inline double clip(double v, double lo, double hi) { return v >= lo ? (v <= hi ? v : hi) : lo; }

// Rounds up to a multiple of `to` (a power of two or not).
inline uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace fraglab::gen
