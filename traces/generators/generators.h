// Synthetic workload generators (`fraglab gen KIND`), one file per kind in this folder.
// Each takes its options and a seed and streams events into an EventSink; the same options
// and seed give the same trace. docs/generators.md shows each kind with its `fraglab info`.
#pragma once

#include <cstdint>
#include <string>

#include "traces/generators/gen_common.h"

namespace fraglab::gen {

// Transformer training with PyTorch's allocation structure: fp32 parameters allocated once;
// AdamW states allocated at the first optimizer step and kept; per step the batch, the
// forward's activations (saved for backward, freed in reverse order in backward), autocast's
// bf16 weight copies, short temporaries, gradients allocated in backward and freed by
// zero_grad(set_to_none=True). Sizes follow GPT-2's modules (attention, MLP, layer norms,
// tied embedding and LM head with an fp32 loss).
struct TrainOptions {
  int layers = 12;
  uint64_t hidden = 768;
  int heads = 12;
  uint64_t vocab = 50257;
  uint64_t batch = 8;
  std::string seq = "fixed:1024";  // sequence length per step (a distribution)
  uint64_t seq_multiple = 1;       // round each step's length up to this (padding buckets)
  int steps = 5;
  int ffn_mult = 4;
  bool checkpoint = false;          // full activation checkpointing per layer
  std::string precision = "bf16";   // bf16 (autocast: bf16 activations, fp32 master weights) or fp32
  std::string optimizer = "adamw";  // adamw (two fp32 states per parameter), sgd (none)
  std::string attention = "flash";  // flash (SDPA: no s x s tensor) or eager (scores materialized)
  std::string gelu = "tanh";        // tanh (GPT-2's elementwise NewGELU, fp32 under autocast) or fused
  double dropout = 0.1;             // > 0 keeps dropout masks for backward
};
// Throws std::invalid_argument naming the option ("--layers") for a value out of its bounds;
// generate_train checks first too.
void validate(const TrainOptions& options);
void generate_train(const TrainOptions& options, uint64_t seed, EventSink& sink);

// LLM inference serving with continuous batching: requests arrive as a Poisson process,
// wait for a slot in the running batch, prefill their prompt, then decode one token per
// iteration until their output length; each holds a KV cache that grows token by token
// (contiguous, reallocated by copy when it outgrows its capacity) or in fixed-size pages.
struct ServeOptions {
  double rate = 20;  // requests per second
  uint64_t requests = 1000;
  std::string prompt = "lognormal:512:1";  // prompt tokens
  std::string output = "lognormal:128:1";  // generated tokens
  uint64_t max_tokens = 8192;              // prompt + output clipped to this
  int max_batch = 32;
  std::string kv = "contiguous";    // contiguous or paged
  double growth = 1.0;              // contiguous: new capacity = max(need, old * growth); 1 = exact
  uint64_t page_tokens = 16;        // paged: tokens per page
  int kv_tensors = 2;               // separately allocated K/V tensors per request (2 = K and V)
  uint64_t kv_bytes_per_token = 0;  // 0: 2 (K,V) * layers * hidden * 2 bytes, over kv_tensors
  int layers = 32;
  uint64_t hidden = 4096;
  uint64_t vocab = 32000;
  uint64_t weights = 0;  // model weight bytes allocated at start; 0: 12 * layers * hidden^2 * 2
};
// Throws std::invalid_argument naming the option ("--layers") for a value out of its bounds;
// generate_serve checks first too.
void validate(const ServeOptions& options);
void generate_serve(const ServeOptions& options, uint64_t seed, EventSink& sink);

// Independent allocations with sizes and lifetimes from distributions; lifetimes (counted
// in allocations) are scaled so the live footprint settles at `target_live`.
struct RandomOptions {
  uint64_t allocs = 1000000;
  std::string size = "lognormal:256KiB:2";
  std::string lifetime = "exp";  // exp, uniform, lognormal:SIGMA, powerlaw:ALPHA (shape; scale from the target)
  uint64_t target_live = 1ull << 30;
  uint64_t align = 1;  // round sizes up to this
};
// Throws std::invalid_argument naming the option ("--layers") for a value out of its bounds;
// generate_random checks first too.
void validate(const RandomOptions& options);
void generate_random(const RandomOptions& options, uint64_t seed, EventSink& sink);

// Patterns that defeat classes of placement policies.
//   robson:  rounds of many small blocks, every other one freed, then blocks twice as big
//            that fit none of the holes (Robson's worst case for best and first fit: the
//            reserved memory grows with log(max/min) while live bytes stay bounded).
//   buddy:   sizes just above a power of two (2^k + align): binary buddy allocators round
//            each up to 2^(k+1) and waste almost half.
//   growth:  a buffer that grows by a little each step, the old one freed after the new one
//            is allocated (realloc by copy): no freed hole ever fits the next request.
struct AdversarialOptions {
  std::string pattern = "robson";
  uint64_t live = 1ull << 30;  // live bytes the pattern keeps (about)
  uint64_t min_size = 4096;
  uint64_t max_size = 64ull << 20;
  uint64_t align = 512;
  int rounds = 4;  // repetitions of the whole pattern
};
// Throws std::invalid_argument naming the option ("--layers") for a value out of its bounds;
// generate_adversarial checks first too.
void validate(const AdversarialOptions& options);
void generate_adversarial(const AdversarialOptions& options, uint64_t seed, EventSink& sink);

}  // namespace fraglab::gen
