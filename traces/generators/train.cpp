// `fraglab gen train`: transformer training as PyTorch's caching allocator sees it.
//
// Modelled on GPT-2 as implemented by Hugging Face transformers (modeling_gpt2.py) trained
// with torch.autocast(bfloat16) and torch.optim.AdamW(foreach=True):
//   - parameters (fp32 master weights) allocated once, in module order;
//   - per step: the batch (token ids, labels); the forward pass records a tape of ops, each
//     keeping the tensors autograd saves for its backward; tensors nobody saves are freed as
//     soon as their consumer has its output (refcounting); autocast's bf16 weight copies are
//     saved by the linear layers that use them;
//   - backward walks the tape in reverse: each op allocates the gradient of its input and
//     short temporaries, produces weight gradients (a bf16 temporary accumulated into an
//     fp32 .grad allocated on first use), then frees what it saved and the incoming gradient;
//   - with activation checkpointing a layer keeps only its input; its backward first
//     recomputes its forward (allocating the saved tensors again);
//   - AdamW allocates exp_avg and exp_avg_sq per parameter at its first step and keeps them;
//     each step's foreach update allocates one temporary per parameter (sqrt of exp_avg_sq);
//   - zero_grad(set_to_none=True) frees every .grad.
#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

#include "traces/generators/generators.h"

namespace fraglab::gen {

namespace {

// Bounds of the options (validate()): generous for any model trained today, small enough that
// no size wraps and the trace stays within reach (the events grow with steps x layers).
constexpr double kMaxSeq = 1 << 20;
constexpr int kMaxLayers = 1024;
constexpr uint64_t kMaxHidden = 1 << 16, kMaxVocab = 1 << 24, kMaxBatch = 1 << 16;
constexpr double kMaxStepsTimesLayers = 1e7;

struct Param {
  uint64_t elems = 0;
  bool matrix = false;  // linear weights get autocast copies and bf16 gradient temporaries
  AllocId id = 0, grad = 0;
  bool has_grad = false;
};

// One forward op as autograd keeps it.
struct Op {
  std::vector<AllocId> saved;       // freed by its backward, last saved first
  uint64_t grad_in = 0;             // bytes of the gradient of its activation input
  std::vector<uint64_t> bwd_temps;  // short temporaries of its backward
  std::vector<int> params;          // parameters whose gradients it produces
};

class Trainer {
 public:
  Trainer(const TrainOptions& o, uint64_t seed, EventSink& sink)
      : o_(o), sink_(sink), rng_(seed), seq_(Dist::parse(o.seq, false)) {
    validate(o);
    if (o.precision != "bf16" && o.precision != "fp32")
      throw std::invalid_argument("train: --precision is bf16 or fp32");
    if (o.optimizer != "adamw" && o.optimizer != "sgd")
      throw std::invalid_argument("train: --optimizer is adamw or sgd");
    if (o.attention != "eager" && o.attention != "flash")
      throw std::invalid_argument("train: --attention is eager or flash");
    if (o.gelu != "tanh" && o.gelu != "fused") throw std::invalid_argument("train: --gelu is tanh or fused");
    mixed_ = o.precision == "bf16";
    eb_ = mixed_ ? 2 : 4;
  }

  void run() {
    create_params();
    for (int step = 0; step < o_.steps; ++step) train_step();
  }

 private:
  // Parameter indices: wte, wpe, then 12 per layer, then ln_f weight and bias.
  static constexpr int kPerLayer = 12;
  int layer_param(int layer, int k) const { return 2 + layer * kPerLayer + k; }
  int lnf() const { return 2 + o_.layers * kPerLayer; }

  AllocId alloc(uint64_t bytes) {
    sink_.advance(1 + static_cast<int64_t>(bytes >> 17));  // ~128 GB/s of work per byte made
    return sink_.alloc(bytes);
  }
  void release(AllocId id) {
    sink_.advance(1);
    sink_.free(id);
  }

  void create_params() {
    const uint64_t h = o_.hidden, f = h * static_cast<uint64_t>(o_.ffn_mult);
    auto add = [&](uint64_t elems, bool matrix) {
      Param p;
      p.elems = elems;
      p.matrix = matrix;
      p.id = alloc(elems * 4);
      params_.push_back(p);
    };
    add(o_.vocab * h, true);    // wte, tied to the LM head
    add(max_seq() * h, false);  // wpe
    for (int l = 0; l < o_.layers; ++l) {
      add(h, false), add(h, false);             // ln_1
      add(3 * h * h, true), add(3 * h, false);  // attn.c_attn
      add(h * h, true), add(h, false);          // attn.c_proj
      add(h, false), add(h, false);             // ln_2
      add(f * h, true), add(f, false);          // mlp.c_fc
      add(h * f, true), add(h, false);          // mlp.c_proj
    }
    add(h, false), add(h, false);  // ln_f
  }

  uint64_t max_seq() const {
    // (samples clipped to kMaxSeq: validate() bounds the distribution, its tail is cut)
    // Position table size: the largest length the distribution can give, at least 1024 (GPT-2).
    Rng probe(1);
    uint64_t m = 1024;
    for (int i = 0; i < 1000; ++i) m = std::max(m, static_cast<uint64_t>(clip(seq_.sample(probe), 1, kMaxSeq)));
    return m;
  }

  uint64_t draw_seq() {
    auto s = static_cast<uint64_t>(clip(seq_.sample(rng_), 1, kMaxSeq));
    return round_up(s, std::max<uint64_t>(1, o_.seq_multiple));
  }

  // Autocast's cast of a parameter to bf16: weights are saved by the matmul for backward;
  // biases stay in autocast's cache until the forward leaves the autocast region.
  AllocId cast_param(int p) { return alloc(params_[p].elems * 2); }
  void cache_bias_cast(int bias) {
    if (mixed_) autocast_cache_.push_back(cast_param(bias));
  }

  void leave_autocast() {
    for (AllocId id : autocast_cache_) release(id);
    autocast_cache_.clear();
  }

  // A linear layer's inputs as autocast gives them: bf16 copies of an fp32 input and of the
  // weight (both saved for backward), the bias cast cached; in fp32 the input itself is saved.
  void linear_inputs(Op& op, int weight, uint64_t in_bytes_fp32, AllocId input, bool input_owned) {
    if (mixed_) {
      op.saved.push_back(cast_param(weight));
      op.saved.push_back(alloc(in_bytes_fp32 / 4 * 2));
      cache_bias_cast(weight + 1);
      if (input_owned) release(input);
    } else {
      op.saved.push_back(input);
    }
  }

  // GPT-2's NewGELUActivation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as eager
  // elementwise ops: pow runs in fp32 under autocast and type promotion keeps the rest fp32.
  // Returns the (fp32 under autocast) product; `x` is saved by the ops that need it.
  AllocId gelu_tanh(std::vector<Op>& tape, AllocId x, uint64_t elems) {
    const uint64_t wide = elems * (mixed_ ? 4 : eb_);
    Op& pow = tape.emplace_back();
    pow.saved = {x};
    pow.grad_in = elems * eb_;
    pow.bwd_temps = {wide, wide};
    AllocId cube = alloc(wide);
    AllocId scaled = alloc(wide);  // 0.044715 * x^3
    release(cube);
    AllocId inner = alloc(wide);  // x + ...
    release(scaled);
    AllocId arg = alloc(wide);  // sqrt(2/pi) * (...)
    release(inner);
    Op& tanh = tape.emplace_back();
    AllocId t = alloc(wide);
    release(arg);
    tanh.saved = {t};
    tanh.grad_in = wide;
    tanh.bwd_temps = {wide};
    Op& mul = tape.emplace_back();
    AllocId one_plus = alloc(wide);
    AllocId half_x = alloc(elems * eb_);
    mul.saved = {one_plus, half_x};
    mul.grad_in = wide;
    mul.bwd_temps = {wide};
    return alloc(wide);
  }

  // One transformer block; returns its output. `keep`: autograd keeps what ops save (no
  // checkpointing, or the recomputation in backward); otherwise only the input survives.
  AllocId block_forward(int l, AllocId x, bool keep, std::vector<Op>& tape) {
    const uint64_t T = tokens_, s = seq_len_, b = o_.batch, h = o_.hidden, a = static_cast<uint64_t>(o_.heads);
    const uint64_t f = h * static_cast<uint64_t>(o_.ffn_mult);
    const size_t first = tape.size();
    auto op = [&]() -> Op& { return tape.emplace_back(); };

    // ln_1 (fp32 under autocast): saves its input and the per-row mean and rstd.
    Op& ln1 = op();
    AllocId ln1_out = alloc(T * h * 4);
    ln1.saved = {x, alloc(T * 4), alloc(T * 4)};
    ln1.grad_in = T * h * 4;
    ln1.params = {layer_param(l, 0), layer_param(l, 1)};

    // c_attn: qkv projection.
    Op& qkv_op = op();
    linear_inputs(qkv_op, layer_param(l, 2), T * h * 4, ln1_out, true);
    AllocId qkv = alloc(T * 3 * h * eb_);
    qkv_op.grad_in = T * h * 4;
    qkv_op.params = {layer_param(l, 2), layer_param(l, 3)};

    // Attention core.
    Op& attn = op();
    attn.saved.push_back(qkv);
    attn.grad_in = T * 3 * h * eb_;
    AllocId ctx;
    if (o_.attention == "eager") {
      const uint64_t S = b * a * s * s;
      AllocId scores = alloc(S * eb_);
      AllocId scaled = alloc(S * eb_);
      release(scores);
      AllocId masked = alloc(S * eb_);
      release(scaled);
      AllocId probs = alloc(S * (mixed_ ? 4 : eb_));  // softmax runs in fp32 under autocast
      release(masked);
      attn.saved.push_back(probs);
      AllocId probs_cast = probs;
      if (mixed_) probs_cast = alloc(S * eb_);
      if (o_.dropout > 0) {
        attn.saved.push_back(alloc(S));  // dropout mask (bool)
        AllocId dropped = alloc(S * eb_);
        if (mixed_) release(probs_cast);
        probs_cast = dropped;
      }
      if (probs_cast != probs) attn.saved.push_back(probs_cast);
      ctx = alloc(T * h * eb_);
      attn.bwd_temps = {S * eb_, S * (mixed_ ? 4 : eb_)};  // grad of probs, softmax backward
    } else {
      ctx = alloc(T * h * eb_);
      attn.saved.push_back(ctx);
      attn.saved.push_back(alloc(b * a * s * 4));  // logsumexp
      attn.bwd_temps = {T * h * 4};                // dq accumulator
    }
    AllocId merged = alloc(T * h * eb_);  // merge heads: permute + contiguous
    if (o_.attention == "eager") release(ctx);

    // c_proj + residual dropout + residual add.
    Op& proj = op();               // its input is already in the activation dtype: only the weight is cast
    proj.saved.push_back(merged);  // saved lists run oldest first: backward frees newest first
    if (mixed_) proj.saved.push_back(cast_param(layer_param(l, 4))), cache_bias_cast(layer_param(l, 5));
    AllocId po = alloc(T * h * eb_);
    proj.grad_in = T * h * eb_;
    proj.params = {layer_param(l, 4), layer_param(l, 5)};
    AllocId x_mid = residual_dropout(tape, po, x);

    // ln_2 and the MLP.
    Op& ln2 = op();
    AllocId ln2_out = alloc(T * h * 4);
    ln2.saved = {x_mid, alloc(T * 4), alloc(T * 4)};
    ln2.grad_in = T * h * 4;
    ln2.params = {layer_param(l, 6), layer_param(l, 7)};

    Op& fc = op();
    linear_inputs(fc, layer_param(l, 8), T * h * 4, ln2_out, true);
    AllocId fc_out = alloc(T * f * eb_);
    fc.grad_in = T * h * 4;
    fc.params = {layer_param(l, 8), layer_param(l, 9)};

    AllocId act;
    if (o_.gelu == "tanh") {
      act = gelu_tanh(tape, fc_out, T * f);
    } else {
      Op& gelu = op();  // one fused kernel
      gelu.saved = {fc_out};
      act = alloc(T * f * eb_);
      gelu.grad_in = T * f * eb_;
    }

    Op& proj2 = op();
    if (o_.gelu == "tanh" && mixed_) {
      linear_inputs(proj2, layer_param(l, 10), T * f * 4, act, true);
    } else {
      proj2.saved.push_back(act);
      if (mixed_) proj2.saved.push_back(cast_param(layer_param(l, 10))), cache_bias_cast(layer_param(l, 11));
    }
    AllocId p2 = alloc(T * h * eb_);
    proj2.grad_in = T * f * eb_;
    proj2.params = {layer_param(l, 10), layer_param(l, 11)};
    AllocId out = residual_dropout(tape, p2, x_mid);

    if (!keep) {
      // Checkpointed (the autocast cache is the one thing a checkpoint does not drop): nothing but the block's input
      // outlives the forward.
      for (size_t i = first; i < tape.size(); ++i)
        for (AllocId id : tape[i].saved)
          if (id != x) release(id);
      tape.resize(first);
    }
    return out;
  }

  // dropout(branch) + residual: the mask is saved; the sum is a new fp32 tensor.
  AllocId residual_dropout(std::vector<Op>& tape, AllocId branch, AllocId residual) {
    (void)residual;  // stays alive: the next layer norm saves it
    const uint64_t T = tokens_, h = o_.hidden;
    Op& drop = tape.emplace_back();
    drop.grad_in = T * h * eb_;
    AllocId dropped = branch;
    if (o_.dropout > 0) {
      drop.saved.push_back(alloc(T * h));
      dropped = alloc(T * h * eb_);
      release(branch);
    }
    AllocId sum = alloc(T * h * 4);
    release(dropped);
    Op& add = tape.emplace_back();
    add.grad_in = T * h * 4;
    return sum;
  }

  void grad_of(int p) {
    Param& param = params_[p];
    AllocId temp = 0;
    if (mixed_ && param.matrix) temp = alloc(param.elems * 2);  // bf16 weight gradient
    if (!param.has_grad) {
      param.grad = alloc(param.elems * 4);
      param.has_grad = true;
    }
    if (mixed_ && param.matrix) release(temp);
  }

  // Backward through ops [first, end) of a tape, last op first. `grad` is the incoming
  // gradient (freed when consumed); returns the gradient of the first op's input.
  AllocId backward(std::vector<Op>& tape, size_t first, AllocId grad) {
    for (size_t i = tape.size(); i-- > first;) {
      Op& op = tape[i];
      AllocId grad_in = op.grad_in ? alloc(op.grad_in) : 0;
      std::vector<AllocId> temps;
      for (uint64_t t : op.bwd_temps) temps.push_back(alloc(t));
      for (int p : op.params) grad_of(p);
      for (auto it = temps.rbegin(); it != temps.rend(); ++it) release(*it);
      for (auto it = op.saved.rbegin(); it != op.saved.rend(); ++it) release(*it);
      if (grad) release(grad);
      grad = grad_in;
    }
    tape.resize(first);
    return grad;
  }

  void train_step() {
    seq_len_ = draw_seq();
    tokens_ = o_.batch * seq_len_;
    const uint64_t T = tokens_, h = o_.hidden, V = o_.vocab, T1 = o_.batch * (seq_len_ - (seq_len_ > 1));
    AllocId ids = alloc(T * 8), labels = alloc(T * 8);

    // Embedding: token + position, dropout.
    std::vector<Op> tape;
    tape.reserve(16 * static_cast<size_t>(o_.layers) + 16);  // ops hold references while the tape grows
    Op& emb = tape.emplace_back();
    AllocId tok = alloc(T * h * 4), pos = alloc(seq_len_ * h * 4);
    AllocId x = alloc(T * h * 4);
    release(pos);
    release(tok);
    emb.params = {0, 1};
    if (o_.dropout > 0) {
      emb.saved.push_back(alloc(T * h));
      AllocId xd = alloc(T * h * 4);
      release(x);
      x = xd;
    }
    std::vector<AllocId> block_inputs;
    for (int l = 0; l < o_.layers; ++l) {
      block_inputs.push_back(x);
      x = block_forward(l, x, !o_.checkpoint, tape);
    }

    // ln_f, tied LM head, fp32 loss over the shifted logits.
    Op& lnf_op = tape.emplace_back();
    AllocId lnf_out = alloc(T * h * 4);
    lnf_op.saved = {x, alloc(T * 4), alloc(T * 4)};
    lnf_op.grad_in = T * h * 4;
    lnf_op.params = {lnf(), lnf() + 1};
    Op& head = tape.emplace_back();
    linear_inputs(head, 0, T * h * 4, lnf_out, true);
    head.grad_in = T * h * 4;
    head.params = {0};
    AllocId logits = alloc(T * V * eb_);
    AllocId logits32 = logits;
    if (mixed_) {
      Op& cast = tape.emplace_back();  // .float() before the loss; the model returns it
      cast.grad_in = T * V * 2;
      logits32 = alloc(T * V * 4);
      release(logits);
    }
    Op& loss_op = tape.emplace_back();
    AllocId shifted = alloc(T1 * V * 4);         // logits[..., :-1, :].contiguous()
    loss_op.saved.push_back(alloc(T1 * V * 4));  // log_softmax output
    release(shifted);
    leave_autocast();
    AllocId loss = alloc(4);
    loss_op.grad_in = T * V * 4;
    loss_op.bwd_temps = {T1 * V * 4, T1 * V * 4};

    // Backward: head ops, then blocks last first (recomputing checkpointed ones), then embedding.
    // Index 0 is the embedding; with checkpointing the blocks are not on the tape.
    AllocId grad = alloc(4);  // d loss / d loss
    grad = backward(tape, 1, grad);
    if (o_.checkpoint) {
      for (int l = o_.layers - 1; l >= 0; --l) {
        size_t start = tape.size();
        AllocId recomputed = block_forward(l, block_inputs[l], true, tape);
        leave_autocast();  // the recomputation runs in its own autocast region
        grad = backward(tape, start, grad);
        release(recomputed);
      }
    }
    grad = backward(tape, 0, grad);
    if (grad) release(grad);
    release(loss);
    release(logits32);
    release(labels);
    release(ids);

    optimizer_step();
    for (Param& p : params_)  // zero_grad(set_to_none=True)
      if (p.has_grad) release(p.grad), p.has_grad = false;
  }

  void optimizer_step() {
    if (o_.optimizer != "adamw") return;
    if (!states_allocated_) {
      for (Param& p : params_) {
        if (!p.has_grad) continue;
        states_.push_back(alloc(p.elems * 4));  // exp_avg
        states_.push_back(alloc(p.elems * 4));  // exp_avg_sq
      }
      states_allocated_ = true;
    }
    std::vector<AllocId> sqrt;  // torch._foreach_sqrt(exp_avg_sqs)
    for (Param& p : params_)
      if (p.has_grad) sqrt.push_back(alloc(p.elems * 4));
    for (AllocId id : sqrt) release(id);
  }

  const TrainOptions& o_;
  EventSink& sink_;
  Rng rng_;
  Dist seq_;
  bool mixed_ = true;
  uint64_t eb_ = 2, seq_len_ = 0, tokens_ = 0;
  std::vector<Param> params_;
  std::vector<AllocId> states_;
  std::vector<AllocId> autocast_cache_;
  bool states_allocated_ = false;
};

}  // namespace

void validate(const TrainOptions& o) {
  const char* k = "train";
  check_option(k, "--layers", o.layers, 1, kMaxLayers);
  check_option(k, "--hidden", o.hidden, uint64_t{1}, kMaxHidden);
  check_option(k, "--heads", o.heads, 1, 1024);
  check_option(k, "--vocab", o.vocab, uint64_t{1}, kMaxVocab);
  check_option(k, "--batch", o.batch, uint64_t{1}, kMaxBatch);
  check_option(k, "--seq", parse_dist(k, "--seq", o.seq, false), kMaxSeq);
  check_option(k, "--seq-multiple", o.seq_multiple, uint64_t{0}, static_cast<uint64_t>(kMaxSeq));
  check_option(k, "--steps", o.steps, 0, 1000000);
  check_option(k, "--ffn-mult", o.ffn_mult, 1, 64);
  check_option(k, "--dropout", o.dropout, 0.0, 1.0);
  if (static_cast<double>(o.steps) * o.layers > kMaxStepsTimesLayers)
    throw std::invalid_argument(fmt::format("gen train: --steps x --layers is at most {}, not {} x {}",
                                            kMaxStepsTimesLayers, o.steps, o.layers));
  // The largest tensors, in double so that nothing wraps: logits, eager attention scores, the MLP.
  // A tailed length (lognormal, exp) is judged by its median or mean: its rare long draws are
  // clipped to kMaxSeq, where the bounds above keep every flash-attention size below 2^64 and
  // EventSink refuses one beyond 2^48; eager attention's s^2 could wrap, so it is judged at kMaxSeq.
  const Dist seq = Dist::parse(o.seq, false);
  const double multiple = static_cast<double>(o.seq_multiple);
  const double s = std::max(1024.0, seq.largest()) + multiple;
  const double b = static_cast<double>(o.batch), h = static_cast<double>(o.hidden);
  check_bytes(k, "the logits (--batch x --seq x --vocab x 4)", b * s * static_cast<double>(o.vocab) * 4);
  const double s_eager = seq.has_tail() ? kMaxSeq + multiple : s;
  if (o.attention == "eager")
    check_bytes(k, "the attention scores (--batch x --heads x --seq^2 x 4)", b * o.heads * s_eager * s_eager * 4);
  check_bytes(k, "an MLP activation (--batch x --seq x --hidden x --ffn-mult x 4)", b * s * h * o.ffn_mult * 4);
  check_bytes(k, "the parameters", (12.0 * o.layers * h * h * (1 + o.ffn_mult / 4.0) + o.vocab * h + s * h) * 4);
}

void generate_train(const TrainOptions& options, uint64_t seed, EventSink& sink) {
  Trainer(options, seed, sink).run();
  sink.flush();
}

}  // namespace fraglab::gen
