// The corpus run: every trace x every policy configuration on the simulated device,
// in parallel.
//
// The matrix is trace-major (trace t, configuration p is job t * P + p). A shard K/N
// takes a contiguous slice of it, cut so that the slices carry about equal work by trace
// file size (replay time grows with the trace), which also keeps each trace on one or two
// shards so a node loads only its own part of the corpus. The cut depends only on the
// file list, sizes and N: every node computes the same plan without talking to the others.
//
// Inside one process, worker threads take jobs from a shared queue, biggest traces first
// (the long jobs start early, so the last thread does not finish alone). A trace is loaded
// once, by the first job that needs it, and dropped when its last job ends.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "device/address_space.h"
#include "report/compare_results.h"

namespace fraglab {

struct CompareOptions {
  std::vector<std::string> traces;    // expanded and sorted (expand_corpus)
  std::vector<std::string> policies;  // expanded configurations (expand_policy_list)
  std::optional<uint64_t> capacity;   // simulated device capacity; replays skip failed allocations and count them
  AddressModel addresses = AddressModel::Cuda;  // the simulated device's segment addresses
  std::optional<ShardId> shard;
  unsigned jobs = 0;  // worker threads; 0 = every core
  // Called after each finished job (from worker threads, serialized).
  std::function<void(size_t done, size_t total, const std::string& trace, const std::string& policy)> progress;
};

// Job indices (t * policies + p) of shard K/N. `trace_weights` are the traces' relative costs.
std::vector<size_t> shard_jobs(const std::vector<uint64_t>& trace_weights, size_t policies, const ShardId& shard);

// Runs the (shard's) matrix. Throws FormatError for an unreadable trace and
// std::runtime_error naming trace and policy when a replay fails.
CompareResults run_compare(const CompareOptions& options);

}  // namespace fraglab
