// fraglab gen KIND [options] --seed S -o OUT: synthetic traces (traces/generators/).
#include <fmt/core.h>

#include <chrono>
#include <filesystem>

#include "allocators/policy_options.h"
#include "cli/commands.h"
#include "traces/generators/generators.h"
#include "traces/trace_io.h"

namespace fraglab::cli {

namespace {

struct GenCommon {
  uint64_t seed = 1;
  std::string out, to;
};

// A byte count option that accepts units ("80GiB").
CLI::Option* size_option(CLI::App* cmd, const std::string& name, uint64_t& value, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          name,
          [&value, name](const std::string& text) {
            try {  // parse_size throws std::invalid_argument, which CLI11 would let escape as an abort
              value = parse_size(text);
            } catch (const std::exception& e) {
              throw CLI::ValidationError(name, e.what());
            }
          },
          help)
      ->default_str(format_size(value));
}

void common_options(CLI::App* cmd, GenCommon& common) {
  cmd->add_option("--seed", common.seed, "Random seed (same seed and options, same trace)")->capture_default_str();
  cmd->add_option("-o,--output", common.out, "Output trace: " + writable_format_list())->required();
  cmd->add_option("--to", common.to, "Output format: " + writable_format_list() + " (default: from the extension)");
}

// The trace's source: the command without its output (and --to), so that the same seed and options
// write the same bytes wherever the file goes. Each option under its long name (get_name(false, true)
// would list every name, "-o,--output").
std::string command_line(const std::string& kind, const CLI::App* cmd) {
  std::string line = "fraglab gen " + kind;
  for (const auto* opt : cmd->get_options()) {
    const std::string name = opt->get_name();
    if (opt->count() == 0 || name == "--help" || name == "--output" || name == "--to") continue;
    for (const auto& r : opt->results()) line += " " + name + " " + r;
  }
  return line;
}

template <typename Generate>
int write_generated(const std::string& kind, const CLI::App* cmd, const GenCommon& common, Generate generate) {
  TraceFormat format = common.to.empty() ? format_for_path(common.out) : parse_format_name(common.to);
  TraceMeta meta;
  meta.format = "generated";
  meta.source = command_line(kind, cmd);
  auto start = std::chrono::steady_clock::now();
  auto writer = create_writer(common.out, format, meta);
  gen::EventSink sink(*writer);
  generate(sink);
  sink.flush();
  writer->finish();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("wrote {} events to {} ({}, {} bytes) in {:.3f} s ({:.1f} M events/s)\n", sink.events(), common.out,
             format_name(format), std::filesystem::file_size(common.out), seconds,
             seconds > 0 ? static_cast<double>(sink.events()) / seconds / 1e6 : 0.0);
  return 0;
}

}  // namespace

void add_gen(CLI::App& app, CommandFn& run) {
  auto* gen = app.add_subcommand("gen", "Generate a synthetic trace: train, serve, random, adversarial");
  gen->require_subcommand(1);

  {
    static gen::TrainOptions o;
    static GenCommon c;
    auto* cmd = gen->add_subcommand("train", "Transformer training (GPT-2 modules, autocast, AdamW)");
    cmd->add_option("--layers", o.layers, "Transformer blocks")->capture_default_str();
    cmd->add_option("--hidden", o.hidden, "Hidden size")->capture_default_str();
    cmd->add_option("--heads", o.heads, "Attention heads")->capture_default_str();
    cmd->add_option("--vocab", o.vocab, "Vocabulary size")->capture_default_str();
    cmd->add_option("--batch", o.batch, "Sequences per step")->capture_default_str();
    cmd->add_option("--seq", o.seq, "Sequence length per step: fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA, ...")
        ->capture_default_str();
    cmd->add_option("--seq-multiple", o.seq_multiple, "Round each step's length up to a multiple (padding)")
        ->capture_default_str();
    cmd->add_option("--steps", o.steps, "Training steps")->capture_default_str();
    cmd->add_option("--ffn-mult", o.ffn_mult, "MLP width / hidden")->capture_default_str();
    cmd->add_flag("--checkpoint", o.checkpoint, "Full activation checkpointing per block");
    cmd->add_option("--precision", o.precision, "bf16 (autocast, fp32 master weights) or fp32")->capture_default_str();
    cmd->add_option("--optimizer", o.optimizer, "adamw (two fp32 states per parameter) or sgd")->capture_default_str();
    cmd->add_option("--attention", o.attention, "flash (SDPA, no s x s tensor) or eager (materializes s x s scores)")
        ->capture_default_str();
    cmd->add_option("--gelu", o.gelu, "tanh (GPT-2's elementwise NewGELU) or fused (one kernel)")
        ->capture_default_str();
    cmd->add_option("--dropout", o.dropout, "Dropout probability (> 0 keeps masks for backward)")
        ->capture_default_str();
    common_options(cmd, c);
    cmd->callback([&run, cmd] {
      run = [cmd] {
        gen::validate(o);  // before the output is created
        return write_generated("train", cmd, c, [](gen::EventSink& s) { gen::generate_train(o, c.seed, s); });
      };
    });
  }
  {
    static gen::ServeOptions o;
    static GenCommon c;
    auto* cmd = gen->add_subcommand("serve", "LLM inference serving: Poisson arrivals, continuous batching, KV cache");
    cmd->add_option("--rate", o.rate, "Requests per second (Poisson)")->capture_default_str();
    cmd->add_option("--requests", o.requests, "Requests in all")->capture_default_str();
    cmd->add_option("--prompt", o.prompt,
                    "Prompt tokens: a distribution (fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA, ...)")
        ->capture_default_str();
    cmd->add_option("--output-tokens", o.output, "Generated tokens: a distribution")->capture_default_str();
    cmd->add_option("--max-tokens", o.max_tokens, "Prompt + output clipped to this")->capture_default_str();
    cmd->add_option("--max-batch", o.max_batch, "Requests running at once")->capture_default_str();
    cmd->add_option("--kv", o.kv, "KV cache: contiguous (grown by copy) or paged")->capture_default_str();
    cmd->add_option("--growth", o.growth, "contiguous: capacity factor on regrowth (1 = every token)")
        ->capture_default_str();
    cmd->add_option("--page-tokens", o.page_tokens, "paged: tokens per page")->capture_default_str();
    cmd->add_option("--kv-tensors", o.kv_tensors, "Separately allocated KV tensors per request")->capture_default_str();
    size_option(cmd, "--kv-bytes-per-token", o.kv_bytes_per_token,
                "Bytes per token per KV tensor (0: 2 * layers * hidden * 2 / kv-tensors)");
    cmd->add_option("--layers", o.layers, "Model layers")->capture_default_str();
    cmd->add_option("--hidden", o.hidden, "Hidden size")->capture_default_str();
    cmd->add_option("--vocab", o.vocab, "Vocabulary size")->capture_default_str();
    size_option(cmd, "--weights", o.weights, "Model weight bytes (0: 12 * layers * hidden^2 * 2)");
    common_options(cmd, c);
    cmd->callback([&run, cmd] {
      run = [cmd] {
        gen::validate(o);  // before the output is created
        return write_generated("serve", cmd, c, [](gen::EventSink& s) { gen::generate_serve(o, c.seed, s); });
      };
    });
  }
  {
    static gen::RandomOptions o;
    static GenCommon c;
    auto* cmd = gen->add_subcommand("random", "Sizes and lifetimes from distributions around a target live footprint");
    cmd->add_option("--allocs", o.allocs, "Allocations")->capture_default_str();
    cmd->add_option("--size", o.size,
                    "Size distribution: uniform:LO:HI, lognormal:MEDIAN:SIGMA, powerlaw:MIN:MAX:ALPHA, "
                    "fixed:V, exp:MEAN (units allowed)")
        ->capture_default_str();
    cmd->add_option("--lifetime", o.lifetime,
                    "Lifetime shape: exp, uniform, fixed, lognormal[:SIGMA], powerlaw[:ALPHA]")
        ->capture_default_str();
    size_option(cmd, "--target-live", o.target_live, "Live bytes the trace settles at");
    size_option(cmd, "--align", o.align, "Round sizes up to a multiple");
    common_options(cmd, c);
    cmd->callback([&run, cmd] {
      run = [cmd] {
        gen::validate(o);  // before the output is created
        return write_generated("random", cmd, c, [](gen::EventSink& s) { gen::generate_random(o, c.seed, s); });
      };
    });
  }
  {
    static gen::AdversarialOptions o;
    static GenCommon c;
    auto* cmd = gen->add_subcommand("adversarial", "Patterns that defeat placement policies: robson, buddy, growth");
    cmd->add_option("--pattern", o.pattern,
                    "robson (best/first fit), buddy (2^k + align sizes), growth (realloc by copy)")
        ->capture_default_str();
    size_option(cmd, "--live", o.live, "Live bytes the pattern keeps (about)");
    size_option(cmd, "--min-size", o.min_size, "Smallest block");
    size_option(cmd, "--max-size", o.max_size, "Largest block");
    size_option(cmd, "--align", o.align, "Allocation granularity");
    cmd->add_option("--rounds", o.rounds, "Repetitions")->capture_default_str();
    common_options(cmd, c);
    cmd->callback([&run, cmd] {
      run = [cmd] {
        gen::validate(o);  // before the output is created
        return write_generated("adversarial", cmd, c,
                               [](gen::EventSink& s) { gen::generate_adversarial(o, c.seed, s); });
      };
    });
  }
}

}  // namespace fraglab::cli
