// `fraglab gen random`: independent allocations, sizes and lifetimes from distributions.
//
// Time is counted in allocations (one per tick). By Little's law the mean live footprint is
// (allocations per tick) x (mean lifetime in ticks) x (mean size), so the lifetime
// distribution's scale is set to target_live / mean size and only its shape is chosen.
#include <algorithm>
#include <cmath>
#include <queue>
#include <stdexcept>

#include "traces/generators/generators.h"

namespace fraglab::gen {

namespace {

// Lifetime in ticks with the given mean, of the shape named by `spec`.
class Lifetime {
 public:
  Lifetime(const std::string& spec, double mean) : mean_(mean) {
    auto colon = spec.find(':');
    std::string shape = spec.substr(0, colon);
    bool has_param = colon != std::string::npos;
    if (has_param) {
      size_t used = 0;
      const std::string text = spec.substr(colon + 1);
      try {
        param_ = std::stod(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != text.size() || !(param_ >= 0 && param_ <= 100))
        throw std::invalid_argument("gen random: --lifetime: bad parameter in '" + spec + "' (a number from 0 to 100)");
    }
    if (shape == "exp") {
      shape_ = Shape::Exponential;
    } else if (shape == "uniform") {
      shape_ = Shape::Uniform;
    } else if (shape == "fixed") {
      shape_ = Shape::Fixed;
    } else if (shape == "lognormal") {
      shape_ = Shape::LogNormal;
      if (!has_param) param_ = 1.0;
      median_ = mean_ * std::exp(-param_ * param_ / 2);  // a log-normal's mean is median * e^(sigma^2/2)
    } else if (shape == "powerlaw") {
      shape_ = Shape::Pareto;
      if (!has_param) param_ = 2.5;
      if (param_ <= 1) throw std::invalid_argument("gen random: --lifetime: powerlaw needs ALPHA > 1 (a finite mean)");
      median_ = mean_ * (param_ - 1) / param_;  // Pareto minimum xm: mean = alpha xm / (alpha - 1)
    } else {
      throw std::invalid_argument(
          "gen random: --lifetime is exp, uniform, fixed, lognormal[:SIGMA] or powerlaw[:ALPHA]");
    }
  }

  double sample(Rng& rng) const {
    switch (shape_) {
      case Shape::Exponential:
        return rng.exponential(mean_);
      case Shape::Uniform:
        return 2 * mean_ * rng.uniform01();
      case Shape::Fixed:
        return mean_;
      case Shape::LogNormal:
        return median_ * std::exp(param_ * rng.normal());
      case Shape::Pareto:
        return median_ * std::pow(1.0 - rng.uniform01(), -1.0 / param_);
    }
    return mean_;
  }

 private:
  enum class Shape { Exponential, Uniform, Fixed, LogNormal, Pareto };
  Shape shape_ = Shape::Exponential;
  double param_ = 0, mean_, median_ = 0;
};

}  // namespace

void validate(const RandomOptions& o) {
  const char* k = "random";
  check_option(k, "--allocs", o.allocs, uint64_t{1}, uint64_t{1} << 34);
  check_option(k, "--size", parse_dist(k, "--size", o.size, true), kMaxGenBytes);
  (void)Lifetime(o.lifetime, 1);  // its shape and parameter
  check_option(k, "--target-live", o.target_live, uint64_t{1}, static_cast<uint64_t>(kMaxGenBytes));
  check_option(k, "--align", o.align, uint64_t{1}, uint64_t{1} << 40);
}

void generate_random(const RandomOptions& o, uint64_t seed, EventSink& sink) {
  validate(o);
  Rng rng(seed);
  Dist size = Dist::parse(o.size, true);
  const double mean_size = size.mean();
  Lifetime life(o.lifetime, std::max(1.0, static_cast<double>(o.target_live) / mean_size));
  using Death = std::pair<uint64_t, AllocId>;  // (tick it dies, id)
  std::priority_queue<Death, std::vector<Death>, std::greater<>> dying;
  for (uint64_t tick = 0; tick < o.allocs; ++tick) {
    while (!dying.empty() && dying.top().first <= tick) {
      sink.free(dying.top().second);
      dying.pop();
    }
    auto bytes = static_cast<uint64_t>(clip(size.sample(rng), 1, kMaxGenBytes));
    AllocId id = sink.alloc(round_up(bytes, o.align));
    auto ticks = static_cast<uint64_t>(std::llround(clip(life.sample(rng), 1, 0x1p62)));
    dying.push({tick + std::max<uint64_t>(1, ticks), id});
    sink.advance(1);
  }
  while (!dying.empty()) {  // the program ends: everything is released, earliest first
    sink.free(dying.top().second);
    dying.pop();
  }
  sink.flush();
}

}  // namespace fraglab::gen
