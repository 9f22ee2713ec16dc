// `fraglab gen serve`: LLM inference serving with continuous batching (Orca, OSDI'22;
// vLLM's scheduler without preemption).
//
// Each iteration of the engine: admit waiting requests while the batch has room (each runs
// its prefill: activation temporaries over its prompt, the KV cache for the prompt, logits
// of the last position), then decode one token for every running request (batch-wide
// temporaries and logits; each request's KV cache grows by one token), then release the
// KV cache of requests that reached their output length. Arrivals are a Poisson process.
//
// KV cache layouts:
//   contiguous: per request `kv_tensors` tensors of capacity x bytes-per-token, reallocated
//               by copy (new allocated, then old freed) when a token no longer fits; growth
//               1.0 reallocates on every token, as torch.cat onto a cache does (HF DynamicCache);
//   paged:      fixed pages of page_tokens tokens (vLLM's PagedAttention), one more per
//               tensor whenever the last page is full.
#include <algorithm>
#include <cmath>
#include <deque>
#include <stdexcept>

#include "traces/generators/generators.h"

namespace fraglab::gen {

namespace {

struct Request {
  uint64_t prompt = 0, output = 0, tokens = 0;  // tokens: cached so far
  std::vector<std::vector<AllocId>> pages;      // per KV tensor: its allocations (1 if contiguous)
  uint64_t capacity = 0;                        // contiguous: tokens each tensor holds
  double arrival_us = 0;
};

class Server {
 public:
  Server(const ServeOptions& o, uint64_t seed, EventSink& sink)
      : o_(o), sink_(sink), rng_(seed), prompt_(Dist::parse(o.prompt, false)), output_(Dist::parse(o.output, false)) {
    validate(o);
    paged_ = o.kv == "paged";
    bytes_per_token_ = o.kv_bytes_per_token
                           ? o.kv_bytes_per_token
                           : 2 * static_cast<uint64_t>(o.layers) * o.hidden * 2 / static_cast<uint64_t>(o.kv_tensors);
  }

  void run() {
    load_weights();
    double now = 0, next_arrival = rng_.exponential(1e6 / o_.rate);
    uint64_t arrived = 0;
    while (arrived < o_.requests || !waiting_.empty() || !running_.empty()) {
      while (arrived < o_.requests && next_arrival <= now) {
        waiting_.push_back(new_request(next_arrival));
        ++arrived;
        next_arrival += rng_.exponential(1e6 / o_.rate);
      }
      if (running_.empty() && waiting_.empty()) {  // idle until the next request
        sink_.advance(static_cast<int64_t>(next_arrival - now));
        now = next_arrival;
        continue;
      }
      double spent = iteration();
      now += spent;
      sink_.advance(static_cast<int64_t>(spent));
    }
    for (AllocId id : weights_) sink_.free(id);
  }

 private:
  Request new_request(double at) {
    Request r;
    const double max = static_cast<double>(o_.max_tokens);
    r.prompt = static_cast<uint64_t>(clip(prompt_.sample(rng_), 1, max - 1));
    r.output = static_cast<uint64_t>(clip(output_.sample(rng_), 1, max - static_cast<double>(r.prompt)));
    r.arrival_us = at;
    r.pages.resize(static_cast<size_t>(o_.kv_tensors));
    return r;
  }

  void load_weights() {
    uint64_t total = o_.weights ? o_.weights : 12ull * o_.layers * o_.hidden * o_.hidden * 2;
    uint64_t embed = o_.vocab * o_.hidden * 2;
    weights_.push_back(sink_.alloc(embed));
    uint64_t per_layer = total > embed ? (total - embed) / static_cast<uint64_t>(o_.layers) : 1;
    for (int l = 0; l < o_.layers; ++l) {  // attention (4 h^2) and MLP (8 h^2) weights
      weights_.push_back(sink_.alloc(per_layer / 3));
      weights_.push_back(sink_.alloc(per_layer - per_layer / 3));
    }
    weights_.push_back(sink_.alloc(embed));  // LM head
  }

  // Grows request r's KV cache to hold `tokens` tokens.
  void grow_kv(Request& r, uint64_t tokens) {
    if (paged_) {
      while (r.capacity < tokens) {
        for (auto& pages : r.pages) pages.push_back(sink_.alloc(o_.page_tokens * bytes_per_token_));
        r.capacity += o_.page_tokens;
      }
    } else if (r.capacity < tokens) {
      uint64_t cap = std::max(tokens, static_cast<uint64_t>(std::ceil(static_cast<double>(r.capacity) * o_.growth)));
      for (auto& pages : r.pages) {
        AllocId bigger = sink_.alloc(cap * bytes_per_token_);  // allocate, copy, free the old
        if (!pages.empty()) sink_.free(pages[0]);
        pages.assign(1, bigger);
      }
      r.capacity = cap;
    }
    r.tokens = tokens;
  }

  void temporaries(std::initializer_list<uint64_t> sizes) {
    std::vector<AllocId> ids;
    for (uint64_t s : sizes) ids.push_back(sink_.alloc(s));
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) sink_.free(*it);
  }

  // One engine iteration; returns its duration in microseconds.
  double iteration() {
    const uint64_t h = o_.hidden;
    uint64_t prefill_tokens = 0;
    while (!waiting_.empty() && running_.size() < static_cast<size_t>(o_.max_batch)) {
      Request r = std::move(waiting_.front());
      waiting_.pop_front();
      const uint64_t p = r.prompt;
      AllocId hidden = sink_.alloc(p * h * 2);
      temporaries({p * 3 * h * 2, p * h * 2, p * 4 * h * 2});  // qkv, attention out, MLP up
      grow_kv(r, p);
      temporaries({o_.vocab * 4});  // logits of the last position
      sink_.free(hidden);
      prefill_tokens += p;
      running_.push_back(std::move(r));
    }
    const uint64_t b = running_.size();
    AllocId hidden = sink_.alloc(b * h * 2);
    temporaries({b * 3 * h * 2, b * h * 2, b * 4 * h * 2});
    for (Request& r : running_) grow_kv(r, r.tokens + 1);
    temporaries({b * o_.vocab * 4});
    sink_.free(hidden);
    for (size_t i = 0; i < running_.size();) {
      Request& r = running_[i];
      if (r.tokens - r.prompt >= r.output) {
        for (auto& pages : r.pages)
          for (AllocId id : pages) sink_.free(id);
        running_[i] = std::move(running_.back());
        running_.pop_back();
      } else {
        ++i;
      }
    }
    return 5000.0 + 20.0 * static_cast<double>(b) + 0.2 * static_cast<double>(prefill_tokens);
  }

  const ServeOptions& o_;
  EventSink& sink_;
  Rng rng_;
  Dist prompt_, output_;
  bool paged_ = false;
  uint64_t bytes_per_token_ = 0;
  std::vector<AllocId> weights_;
  std::deque<Request> waiting_;
  std::vector<Request> running_;
};

}  // namespace

void validate(const ServeOptions& o) {
  const char* k = "serve";
  check_option(k, "--rate", o.rate, 1e-3, 1e9);
  check_option(k, "--requests", o.requests, uint64_t{0}, uint64_t{1} << 30);
  parse_dist(k, "--prompt", o.prompt, false);  // samples are clipped to --max-tokens
  parse_dist(k, "--output-tokens", o.output, false);
  check_option(k, "--max-tokens", o.max_tokens, uint64_t{2}, uint64_t{1} << 24);
  check_option(k, "--max-batch", o.max_batch, 1, 1 << 16);
  if (o.kv != "contiguous" && o.kv != "paged") throw std::invalid_argument("gen serve: --kv is contiguous or paged");
  check_option(k, "--growth", o.growth, 1.0, 16.0);
  check_option(k, "--page-tokens", o.page_tokens, uint64_t{1}, o.max_tokens);
  check_option(k, "--kv-tensors", o.kv_tensors, 1, 1024);
  check_option(k, "--kv-bytes-per-token", o.kv_bytes_per_token, uint64_t{0}, uint64_t{1} << 32);
  check_option(k, "--layers", o.layers, 1, 1 << 12);
  check_option(k, "--hidden", o.hidden, uint64_t{1}, uint64_t{1} << 18);
  check_option(k, "--vocab", o.vocab, uint64_t{1}, uint64_t{1} << 24);
  check_option(k, "--weights", o.weights, uint64_t{0}, static_cast<uint64_t>(kMaxGenBytes));
  const double h = static_cast<double>(o.hidden), tokens = static_cast<double>(o.max_tokens);
  const double per_token = o.kv_bytes_per_token ? static_cast<double>(o.kv_bytes_per_token) : 4.0 * o.layers * h;
  // The largest allocations, in double so that nothing wraps: a KV tensor at its largest (growth may
  // overshoot --max-tokens by its factor), the weights, the prefill's MLP, the batch's logits.
  check_bytes(k, "a KV tensor (--max-tokens x bytes per token x --growth)", tokens * o.growth * per_token);
  check_bytes(k, "the weights (12 x --layers x --hidden^2 x 2)", 12.0 * o.layers * h * h * 2);
  check_bytes(k, "a prefill's MLP activation (--max-tokens x 4 x --hidden x 2)", tokens * 8 * h);
  check_bytes(k, "the logits (--max-batch x --vocab x 4)", static_cast<double>(o.max_batch) * o.vocab * 4);
  check_bytes(k, "the embedding (--vocab x --hidden x 2)", static_cast<double>(o.vocab) * h * 2);
}

void generate_serve(const ServeOptions& options, uint64_t seed, EventSink& sink) {
  Server(options, seed, sink).run();
  sink.flush();
}

}  // namespace fraglab::gen
