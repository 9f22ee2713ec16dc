// `fraglab gen random`: independent allocations, sizes and lifetimes from distributions.
//
// Time is counted in allocations (one per tick). By Little's law the mean live footprint is
// (allocations per tick) x (mean lifetime in ticks) x (mean size), so the lifetime
// distribution's scale is set to target_live / mean size and only its shape is chosen.
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
      try {
        param_ = std::stod(spec.substr(colon + 1));
      } catch (const std::exception&) {
        throw std::invalid_argument("random: bad lifetime parameter in '" + spec + "'");
      }
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
      if (param_ <= 1) throw std::invalid_argument("random: powerlaw lifetime needs ALPHA > 1 (a finite mean)");
      median_ = mean_ * (param_ - 1) / param_;  // Pareto minimum xm: mean = alpha xm / (alpha - 1)
    } else {
      throw std::invalid_argument("random: --lifetime is exp, uniform, fixed, lognormal[:SIGMA] or powerlaw[:ALPHA]");
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

void generate_random(const RandomOptions& o, uint64_t seed, EventSink& sink) {
  if (o.allocs == 0 || o.target_live == 0 || o.align == 0)
    throw std::invalid_argument("random: --allocs, --target-live and --align must be positive");
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
    auto bytes = static_cast<uint64_t>(std::max(1.0, size.sample(rng)));
    AllocId id = sink.alloc(round_up(bytes, o.align));
    auto ticks = static_cast<uint64_t>(std::llround(life.sample(rng)));
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
