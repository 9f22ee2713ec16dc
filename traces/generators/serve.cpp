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
    if (o.rate <= 0 || o.max_batch < 1 || o.kv_tensors < 1 || o.layers < 1 || o.hidden == 0 || o.page_tokens == 0 ||
        o.max_tokens < 2 || o.growth < 1.0)
      throw std::invalid_argument(
          "serve: rate, max-batch, kv-tensors, layers, hidden, page-tokens must be positive, "
          "max-tokens >= 2, growth >= 1");
    if (o.kv != "contiguous" && o.kv != "paged") throw std::invalid_argument("serve: --kv is contiguous or paged");
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
    r.prompt = std::clamp<uint64_t>(static_cast<uint64_t>(prompt_.sample(rng_)), 1, o_.max_tokens - 1);
    r.output = std::clamp<uint64_t>(static_cast<uint64_t>(output_.sample(rng_)), 1, o_.max_tokens - r.prompt);
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

void generate_serve(const ServeOptions& options, uint64_t seed, EventSink& sink) {
  Server(options, seed, sink).run();
  sink.flush();
}

}  // namespace fraglab::gen
