#include "allocators/detail/coalescing_pool.h"

namespace fraglab::detail {

std::vector<OptionSpec> PoolConfig::option_specs() {
  return {{"align", "512", "block sizes round up to a multiple of this"},
          {"min_segment", "2MiB", "smallest segment requested from the device"},
          {"segment_round", "2MiB", "segment sizes round up to a multiple of this"},
          {"min_split", "512", "a free remainder smaller than this stays with the block (internal slack)"}};
}

PoolConfig PoolConfig::from_options(const PolicyOptions& options, const std::string& policy) {
  PoolConfig c;
  c.align = options.get_size("align", c.align, kMaxOptionAlign);
  c.min_segment = options.get_size("min_segment", c.min_segment);
  c.segment_round = options.get_size("segment_round", c.segment_round, kMaxOptionAlign);
  c.min_split = options.get_size("min_split", c.min_split);
  // Segment sizes must be multiples of align so that split remainders stay aligned.
  if (c.align == 0 || c.segment_round == 0 || c.segment_round % c.align || c.min_segment % c.align)
    throw PolicyConfigError(policy + ": align must be positive and divide segment_round and min_segment");
  if (c.min_split == 0) throw PolicyConfigError(policy + ": min_split must be positive");
  return c;
}

}  // namespace fraglab::detail
