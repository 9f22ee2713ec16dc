// A tune report's candidate for one PYTORCH_CUDA_ALLOC_CONF, compared by value ("" is PyTorch's defaults), for the
// tests that hold tune's predictions against real runs under that setting.
#pragma once

#include <string>

#include "allocators/policy_options.h"
#include "report/tune.h"

namespace fraglab::test {

inline const TuneCandidate* find_setting(const TuneReport& r, const std::string& conf) {
  for (const auto& c : r.ranking)
    if (PolicyOptions::parse(c.conf).values() == PolicyOptions::parse(conf).values()) return &c;
  return nullptr;
}

}  // namespace fraglab::test
