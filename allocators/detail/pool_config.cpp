#include "allocators/detail/coalescing_pool.h"

namespace fraglab::detail {

std::vector<OptionSpec> PoolConfig::option_specs(std::vector<OptionSpec> more) {
  std::vector<OptionSpec> specs = {kPoolAlign, kPoolMinSegment, kPoolSegmentRound, kPoolMinSplit};
  specs.insert(specs.end(), more.begin(), more.end());
  return specs;
}

PoolConfig PoolConfig::from_options(const PolicyOptions& options, const std::string& policy) {
  PoolConfig c;
  c.align = options.get(kPoolAlign);
  c.min_segment = options.get(kPoolMinSegment);
  c.segment_round = options.get(kPoolSegmentRound);
  c.min_split = options.get(kPoolMinSplit);
  // Segment sizes must be multiples of align so that split remainders stay aligned.
  if (c.align == 0 || c.segment_round == 0 || c.segment_round % c.align || c.min_segment % c.align)
    throw PolicyConfigError(policy + ": align must be positive and divide segment_round and min_segment");
  if (c.min_split == 0) throw PolicyConfigError(policy + ": min_split must be positive");
  return c;
}

}  // namespace fraglab::detail
