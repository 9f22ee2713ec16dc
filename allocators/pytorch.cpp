// pytorch: PyTorch's CUDA caching allocator (DeviceCachingAllocator), modelled exactly.
//
// Design source: PyTorch 2.11, c10/cuda/CUDACachingAllocator.cpp (the algorithm) and
// c10/core/AllocatorConfig.cpp / c10/cuda/CUDAAllocatorConfig.cpp (the settings). The model
// itself is allocators/pytorch/caching_allocator.h; the settings parser
// allocators/pytorch/config.h. Options are PYTORCH_ALLOC_CONF (PYTORCH_CUDA_ALLOC_CONF)
// text, verbatim:
//   --policy 'pytorch:expandable_segments:True,max_split_size_mb:128'
// Plain `pytorch` on a PyTorch snapshot starts from the settings the recording process used
// (its allocator_settings: the recorded PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF text, in
// PyTorch's order, then the values it parsed); options given here override them. A device capacity
// (--capacity) models torch.cuda.set_per_process_memory_fraction, or the GPU's own memory where the
// recording ran out of that (option `limit`). docs/pytorch-model.md
// says what is modelled and how exactly it matches real recordings.
#include <algorithm>
#include <array>

#include "allocators/pytorch/caching_allocator.h"
#include "allocators/pytorch/gpu_memory.h"
#include "allocators/pytorch/limit_drift.h"
#include "allocators/registry.h"
#include "traces/formats/pytorch/settings_inference.h"
#include "traces/io/format_error.h"

namespace fraglab {
namespace {

// Where a capture or use_mem_pool was underway while other streams' requests went to the default pools:
// captures_underway (beginAllocateToPool .. endAllocateToPool) is not in the trace, but a capture routes
// every request of its stream to its pool, so a run of one stream's requests to one private pool lies
// inside the capture, which ends before that stream's next request elsewhere. The trace positions strictly
// between a run's first and last request were inside the capture (a CUDA graph captured on a side stream
// while eager work runs on others); past its last request the end is unknown: a recorded OOM there, before
// any request on the default stream (the program's own, outside the capture: side-stream captures leave
// it idle, make_graphed_callables and graph replays come back to it), is read as inside the capture
// (detail::CaptureWindows): PyTorch skipped release_cached_blocks for it.
detail::CaptureWindows capture_windows(const std::vector<Event>& events, const std::vector<uint64_t>& streams) {
  struct Run {
    PoolIndex pool = 0;
    uint64_t first = 0, last = 0;
  };
  std::vector<Run> runs;                       // by stream: the private-pool run under way
  std::vector<std::array<uint64_t, 3>> ended;  // (first, last, the request or release that ended it)
  std::vector<uint64_t> on_default;            // the default stream's requests
  auto close = [&](Run& run, uint64_t at) {
    if (run.pool != 0) ended.push_back({run.first, run.last, at});
    run.pool = 0;
  };
  for (uint64_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.kind == EventKind::PoolRelease)  // the graph or MemPool is gone: its capture ended before
      for (Run& run : runs)
        if (run.pool == e.pool) close(run, i);
    if (e.kind != EventKind::Alloc && e.kind != EventKind::Oom) continue;
    if (e.kind == EventKind::Alloc && e.stream < streams.size() && streams[e.stream] == 0) on_default.push_back(i);
    if (e.stream >= runs.size()) runs.resize(e.stream + 1u);
    Run& run = runs[e.stream];
    if (run.pool != 0 && run.pool == e.pool) {
      run.last = i;
      continue;
    }
    close(run, i);
    if (e.pool != 0) run = Run{e.pool, i, i};
  }
  for (Run& run : runs) close(run, events.size());
  std::vector<std::pair<uint64_t, uint64_t>> inside, after;
  for (const auto& [first, last, end] : ended) {
    if (last > first + 1) inside.emplace_back(first, last);
    // After the last request, up to what ended the run or the default stream's next request.
    auto next_default = std::upper_bound(on_default.begin(), on_default.end(), last);
    const uint64_t until = next_default == on_default.end() ? end : std::min(end, *next_default);
    if (until > last + 1) after.emplace_back(last, until);
  }
  auto disjoint = [](std::vector<std::pair<uint64_t, uint64_t>> w) {  // for one binary search per question
    std::sort(w.begin(), w.end());
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const auto& x : w)
      if (!out.empty() && x.first < out.back().second)
        out.back().second = std::max(out.back().second, x.second);
      else
        out.push_back(x);
    return out;
  };
  return {disjoint(std::move(inside)), disjoint(std::move(after))};
}

class PytorchPolicy final : public Policy {
 public:
  PytorchPolicy(Device& device, detail::PytorchAllocatorConfig config, const TraceMeta& meta, uint64_t total_memory,
                detail::PytorchLimit limit, const std::vector<Event>* events, bool recorded_expandable)
      : allocator_(device, config, meta.streams, total_memory, meta.pools, limit) {
    // One pass over the trace, only where it has private pools (captures): none to find in any other.
    if (events && meta.pools.size() > 1) allocator_.set_capture_windows(capture_windows(*events, meta.streams));
    // The program's own changes of the setting, where the setting is the recording's (not a what-if).
    if (events && recorded_expandable && !meta.expandable_flipped.empty())
      allocator_.set_expandable_flips(flipped_event_ranges(*events, meta.expandable_flipped));
    // The limit as the device calls show it along the trace (one pass, only where the trace has a limit).
    if (events && device.capacity())
      allocator_.set_limit_drift(
          detail::limit_drift(*events, meta.initial.reserved(), config, limit, *device.capacity()));
  }

  std::optional<Block> allocate(const AllocRequest& req) override {
    allocator_.set_request(req.event_index, req.id == kTransientRequest);
    auto b = allocator_.malloc(req.size, req.stream, req.pool);
    if (!b) return std::nullopt;
    const auto& blk = allocator_.block(*b);
    return Block{blk.addr, blk.size, *b};
  }
  void deallocate(const Block& block) override { allocator_.free(static_cast<uint32_t>(block.handle)); }
  void empty_cache() override { allocator_.empty_cache(); }
  bool enforces_capacity() const override { return allocator_.enforces_limit(); }
  void release_pool(PoolIndex pool) override { allocator_.release_pool(pool); }
  std::optional<std::vector<Block>> adopt_initial_state(const InitialState& state) override {
    auto live = allocator_.adopt(state);
    if (!live) return std::nullopt;
    std::vector<Block> out;
    out.reserve(live->size());
    for (uint32_t b : *live) out.push_back(Block{allocator_.block(b).addr, allocator_.block(b).size, b});
    return out;
  }

 private:
  detail::PytorchCachingAllocator allocator_;
};

// The PYTORCH_CUDA_ALLOC_CONF keys PyTorch 2.11 accepts (AcceleratorAllocatorConfig::parseArgs and
// CUDAAllocatorConfig::parseArgs), handed on as text to detail::PytorchAllocatorConfig, which owns their
// defaults and checks.
constexpr TextOption kConfOptions[] = {
    {"max_split_size_mb", "unset", "blocks this large (MiB) are never split"},
    {"max_non_split_rounding_mb", "20", "an oversize block serves a request only if it wastes less (MiB)"},
    {"garbage_collection_threshold", "0", "with a capacity: reclaim old cached segments above this fraction"},
    {"roundup_power2_divisions", "0", "round sizes to N divisions per power of two; N or [MiB:N,...,>:N]"},
    {"expandable_segments", "False", "one growing virtual segment per stream and pool (True/False)"},
    {"backend", "native", "native only (cudaMallocAsync is not modelled)"},
    {"release_lock_on_cudamalloc", "False", "accepted; no effect on placement"},
    {"pinned_use_cuda_host_register", "False", "accepted; host memory only"},
    {"pinned_num_register_threads", "1", "accepted; host memory only"},
    {"pinned_use_background_threads", "False", "accepted; host memory only"},
    {"large_segment_size_mb", "20", "the segment of a 1-10 MiB request and an expandable large pool's page (MiB)"},
    {"per_process_memory_fraction", "unset",
     "a memory fraction of total_memory, where no --capacity is given (a recorded one is read from the trace)"},
    {"graph_capture_record_stream_reuse", "False", "accepted; the trace's free_completed entries show it"},
    {"pinned_reserve_segment_size_mb", "0", "accepted; host memory only"},
    {"release_lock_on_hipmalloc", "False", "accepted; no effect on placement"},
    {"pinned_use_hip_host_register", "False", "accepted; host memory only"},
};
constexpr const TextOption& kExpandableSegments = kConfOptions[4];
static_assert(std::string_view(kExpandableSegments.key) == "expandable_segments");
// Unset, the GPU's memory is at least what the device may hand out (a capacity from an H200's
// snapshot, say) and what the recording's expandable segments reach (detail::gpu_total_memory_for_maps),
// so that expandable segments reserve the address space they had.
constexpr SizeOption kTotalMemory{"total_memory", detail::kH100TotalMemory,
                                  "the GPU's memory (totalGlobalMem); sizes expandable address ranges"};
// What a capacity stands for. A snapshot does not say whether the job set a memory fraction, but its
// OOMs do: where the recorded free device memory was below the segment a failed request needed,
// cudaMalloc itself failed, and the job ran without a fraction (the garbage collector off, expandable
// segments refused only the pages they map).
constexpr TextOption kLimit{"limit", "auto",
                            "what a capacity is: fraction (set_per_process_memory_fraction), gpu (the GPU's "
                            "memory), or auto (gpu where the trace's OOMs or retries were the GPU's, else "
                            "fraction)"};

detail::PytorchLimit limit_for(const PolicyContext& ctx) {
  const std::string limit = ctx.options.get_string(std::string(kLimit.key), "auto");
  if (limit == "fraction") return detail::PytorchLimit::Fraction;
  if (limit == "gpu") return detail::PytorchLimit::Gpu;
  if (limit != "auto") throw PolicyConfigError("pytorch: limit must be auto, fraction or gpu, not '" + limit + "'");
  // Only a capacity makes the difference: without one the trace is not read.
  if (!ctx.device.capacity()) return detail::PytorchLimit::Fraction;
  if (ctx.meta.gpu_limit) return detail::PytorchLimit::Gpu;  // the retries showed it (sim/capacity.h)
  if (ctx.events)
    for (const Event& e : *ctx.events)
      if (detail::pytorch_oom_was_gpus(e)) return detail::PytorchLimit::Gpu;
  return detail::PytorchLimit::Fraction;
}

detail::PytorchAllocatorConfig config_for(const PolicyContext& ctx) {
  detail::PytorchAllocatorConfig config;
  if (ctx.options.get(detail::kRecordedSettings)) {
    try {
      config.apply_recorded(ctx.meta.allocator_settings);
    } catch (const PolicyConfigError& e) {
      // The settings came from the trace: bad input in that file, named as such.
      std::string where = ctx.meta.source.empty() ? "the trace" : printable(ctx.meta.source);
      throw PolicyConfigError(where + ": recorded allocator settings: " + e.what());
    }
    // A recorded per_process_memory_fraction is a limit like set_per_process_memory_fraction's: the
    // recording's OOMs and collector show it as the device's capacity (sim/capacity.h), not the fraction
    // of a GPU whose memory the snapshot does not record.
    config.per_process_memory_fraction.reset();
  }
  std::string conf;
  for (const TextOption& o : kConfOptions)
    if (ctx.options.has(o))
      conf += (conf.empty() ? "" : ",") + std::string(o.key) + ":" + ctx.options.get_string(std::string(o.key), "");
  config.apply(conf);
  return config;
}

}  // namespace

PolicyInfo policy_info_pytorch() {
  std::vector<OptionSpec> options(std::begin(kConfOptions), std::end(kConfOptions));
  options.insert(options.end(), {detail::kRecordedSettings, kTotalMemory, kLimit});
  return {.name = "pytorch",
          .summary = "PyTorch's CUDA caching allocator, exact (PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF options)",
          .origin = "PyTorch 2.11 c10/cuda/CUDACachingAllocator.cpp, c10/core/AllocatorConfig.cpp",
          .options = options,
          .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
            const detail::PytorchAllocatorConfig config = config_for(ctx);
            uint64_t total = ctx.options.has(kTotalMemory)
                                 ? ctx.options.get(kTotalMemory)
                                 : std::max(kTotalMemory.default_value, ctx.device.capacity().value_or(0));
            // The GPU the import told by replay (TraceMeta::gpu_total_memory); else the least known one whose
            // ranges hold the recording's maps: one pass over the trace, only where expandable segments are
            // on at some point.
            if (!ctx.options.has(kTotalMemory) &&
                (ctx.meta.gpu_total_memory ||
                 (ctx.events && (config.expandable_segments || !ctx.meta.expandable_flipped.empty()))))
              total = detail::gpu_total_memory_for(ctx.events, ctx.meta, total);
            if (total == 0) throw PolicyConfigError("pytorch: total_memory must be positive");
            const bool recorded_expandable =
                ctx.options.get(detail::kRecordedSettings) && !ctx.options.has(kExpandableSegments);
            return std::make_unique<PytorchPolicy>(ctx.device, config, ctx.meta, total, limit_for(ctx), ctx.events,
                                                   recorded_expandable);
          },
          .models_pools = true,  // private pools are PyTorch's own: the model routes requests itself
          .checked_against =
              "PyTorch 2.11.0+cu130, H100: fidelity exact call for call and peak reserved equal to "
              "reserved_bytes.all.peak on the 13 corpus recordings and the 20 of tests/data/snapshots "
              "(mid-run, ring-buffered, OOM'd, CUDA graphs, torch.compile, MemPool); "
              "bench/torch_reference"};
}

}  // namespace fraglab
