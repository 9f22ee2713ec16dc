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

// Rounds up to a multiple of `to` (a power of two or not).
inline uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace fraglab::gen
