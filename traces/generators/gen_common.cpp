#include "traces/generators/gen_common.h"

#include <fmt/core.h>

#include <algorithm>
#include <numbers>
#include <sstream>
#include <stdexcept>

#include "traces/units.h"

namespace fraglab::gen {

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, sep)) parts.push_back(part);
  return parts;
}

double number(const std::string& text, bool size, const std::string& whole) {
  try {
    if (size) return static_cast<double>(parse_size(text));
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(v) || v < 0) throw std::invalid_argument(text);
    return v;
  } catch (const std::exception&) {
    throw std::invalid_argument("bad number '" + text + "' in distribution '" + whole + "' (a finite number >= 0" +
                                (size ? ", units allowed)" : ")"));
  }
}

}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  uint64_t result = rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::normal() {
  if (has_spare_) {  // Box-Muller makes two independent values per pair of uniforms
    has_spare_ = false;
    return spare_;
  }
  double u1 = 1.0 - uniform01();  // (0, 1]
  double u2 = uniform01();
  double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::exponential(double mean) { return -mean * std::log(1.0 - uniform01()); }

Dist Dist::parse(const std::string& text, bool sizes) {
  auto parts = split(text, ':');
  Dist d;
  d.text_ = text;
  auto need = [&](size_t n, const char* form) {
    if (parts.size() != n) throw std::invalid_argument("distribution '" + text + "' must look like " + form);
  };
  if (parts.empty()) throw std::invalid_argument("empty distribution");
  const std::string& kind = parts[0];
  if (kind == "fixed") {
    need(2, "fixed:V");
    d.kind_ = Kind::Fixed;
    d.a_ = number(parts[1], sizes, text);
  } else if (kind == "uniform") {
    need(3, "uniform:LO:HI");
    d.kind_ = Kind::Uniform;
    d.a_ = number(parts[1], sizes, text);
    d.b_ = number(parts[2], sizes, text);
    if (d.b_ < d.a_) throw std::invalid_argument("uniform: HI < LO in '" + text + "'");
  } else if (kind == "lognormal") {
    need(3, "lognormal:MEDIAN:SIGMA");
    d.kind_ = Kind::LogNormal;
    d.a_ = number(parts[1], sizes, text);
    d.b_ = number(parts[2], false, text);
    if (d.a_ <= 0 || d.b_ < 0 || d.b_ > 20)
      throw std::invalid_argument("lognormal needs MEDIAN > 0, 0 <= SIGMA <= 20: '" + text + "'");
  } else if (kind == "powerlaw") {
    need(4, "powerlaw:MIN:MAX:ALPHA");
    d.kind_ = Kind::PowerLaw;
    d.a_ = number(parts[1], sizes, text);
    d.b_ = number(parts[2], sizes, text);
    d.c_ = number(parts[3], false, text);
    if (d.a_ <= 0 || d.b_ < d.a_ || d.c_ <= 0 || d.c_ == 1 || d.c_ > 100)
      throw std::invalid_argument("powerlaw needs 0 < MIN <= MAX, 0 < ALPHA <= 100 and != 1: '" + text + "'");
  } else if (kind == "exp") {
    need(2, "exp:MEAN");
    d.kind_ = Kind::Exponential;
    d.a_ = number(parts[1], sizes, text);
    if (d.a_ <= 0) throw std::invalid_argument("exp needs MEAN > 0: '" + text + "'");
  } else {
    throw std::invalid_argument("unknown distribution '" + kind + "' (fixed, uniform, lognormal, powerlaw, exp)");
  }
  return d;
}

double Dist::largest() const {
  switch (kind_) {
    case Kind::Uniform:
    case Kind::PowerLaw:
      return b_;
    default:
      return a_;
  }
}

void check_option(const char* kind, const char* option, double value, double lo, double hi) {
  if (value >= lo && value <= hi) return;
  throw std::invalid_argument(fmt::format("gen {}: {} must be from {} to {}, not {}", kind, option, lo, hi, value));
}

void check_option(const char* kind, const char* option, uint64_t value, uint64_t lo, uint64_t hi) {
  if (value >= lo && value <= hi) return;
  throw std::invalid_argument(fmt::format("gen {}: {} must be from {} to {}, not {}", kind, option, lo, hi, value));
}

Dist parse_dist(const char* kind, const char* option, const std::string& text, bool sizes) {
  try {
    return Dist::parse(text, sizes);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("gen {}: {}: {}", kind, option, e.what()));
  }
}

void check_option(const char* kind, const char* option, int value, int lo, int hi) {
  if (value >= lo && value <= hi) return;
  throw std::invalid_argument(fmt::format("gen {}: {} must be from {} to {}, not {}", kind, option, lo, hi, value));
}

void check_option(const char* kind, const char* option, const Dist& dist, double hi) {
  if (dist.largest() <= hi) return;
  throw std::invalid_argument(
      fmt::format("gen {}: {} '{}' reaches {}; at most {} is allowed", kind, option, dist.text(), dist.largest(), hi));
}

void check_bytes(const char* kind, const char* what, double bytes) {
  if (bytes <= kMaxGenBytes) return;
  throw std::invalid_argument(
      fmt::format("gen {}: {} would be {:.4g} bytes, more than the 2^48-byte address space", kind, what, bytes));
}

double Dist::sample(Rng& rng) const {
  switch (kind_) {
    case Kind::Fixed:
      return a_;
    case Kind::Uniform:
      return a_ + (b_ - a_) * rng.uniform01();
    case Kind::LogNormal:
      return a_ * std::exp(b_ * rng.normal());
    case Kind::PowerLaw: {
      // Inverse CDF of p(x) ~ x^-alpha on [min, max].
      double e = 1.0 - c_;
      double lo = std::pow(a_, e), hi = std::pow(b_, e);
      return std::pow(lo + (hi - lo) * rng.uniform01(), 1.0 / e);
    }
    case Kind::Exponential:
      return rng.exponential(a_);
  }
  return a_;
}

double Dist::mean() const {
  Rng rng(12345);
  double sum = 0;
  constexpr int kSamples = 200000;
  for (int i = 0; i < kSamples; ++i) sum += sample(rng);
  return sum / kSamples;
}

AllocId EventSink::alloc(uint64_t size, StreamIndex stream) {
  if (size > static_cast<uint64_t>(kMaxGenBytes))  // the options' checks bound sizes; a tail may still reach here
    throw std::invalid_argument(
        fmt::format("gen: an allocation of {} bytes is more than the 2^48-byte address space", size));
  AllocId id = slots_.acquire();
  if (id >= sizes_.size()) sizes_.resize(id + 1);
  sizes_[id] = size;
  live_bytes_ += size;
  push({EventKind::Alloc, stream, id, size, 0, time_us_, 0});
  return id;
}

void EventSink::free(AllocId id) {
  live_bytes_ -= sizes_[id];
  slots_.release(id);
  push({EventKind::Free, 0, id, 0, 0, time_us_, 0});
}

void EventSink::empty_cache() { push({EventKind::EmptyCache, 0, 0, 0, 0, time_us_, 0}); }

void EventSink::flush() {
  if (!buffer_.empty()) writer_.write(buffer_.data(), buffer_.size());
  buffer_.clear();
}

}  // namespace fraglab::gen
