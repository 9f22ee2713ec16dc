#!/usr/bin/env bash
# Records, on a GPU machine, the snapshots the test suite replays for the cases users' snapshots come
# in (tests/data/snapshots/SOURCE.md): histories started late or ring-buffered, no history, CUDA graphs,
# torch.compile's reduce-overhead mode, MemPools, OOMs under a memory fraction. Each run is a fresh
# process (REC_TIMEOUT=S stops one after S seconds). Usage: scripts/record_snapshot_cases.sh OUTDIR [GROUP...]   (groups: snapshots pools pools2 ooms deviceoom deviceoom2 cudnn graphtrees observer workloads lateprivate gcfraction mempoolvariants twogpus ranks ranks_oom large probe_generate probe_compile probe_settings probe_train probe_streams probe_fraction probe_expfraction probe2_pools probe2_compile probe2_train probe2_settings settings_toggle probe3 probe4 probe5 probe6 probe7 probe8 probe9 probe10 probe11 probe12 probe13 probe14 probe15 probe15b probe16 probe17 probe18 issue39 skipactions)
set -uo pipefail
out=${1:?OUTDIR}; shift
groups=${*:-snapshots pools ooms}
mkdir -p "$out"
rec() {  # rec "ENV=... ENV=..." WORKLOAD
  echo "== $1 $2"
  timeout "${REC_TIMEOUT:-0}" env $1 python3 "$(dirname "$0")/record_torch_traces.py" "$2" "$out" >"$out/$2.$(echo "$1" | tr ' =:,' '_-__').log" 2>&1 \
    || { echo "FAILED: $1 $2"; tail -5 "$out/$2.$(echo "$1" | tr ' =:,' '_-__').log"; }
}
E=PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
for g in $groups; do case $g in
  snapshots)
    rec "RECORD=late:2" gpt2_train
    rec "RECORD=late:2 $E" gpt2_train
    rec "MAX_ENTRIES=60000" bert_varlen_train
    rec "MAX_ENTRIES=60000 $E" bert_varlen_train
    rec "MAX_ENTRIES=700" side_stream_prefetch
    rec "RECORD=off" gpt2_train
    rec "RECORD=off $E" side_stream_prefetch ;;
  pools)
    rec "X=1" graph_mlp_train
    rec "$E" graph_mlp_train
    rec "X=1" mempool_side
    rec "$E" mempool_side
    rec "X=1" compile_reduce_overhead ;;
  pools2)
    for w in ${POOLS2:-graph_shared_pool graphs_two_pools graphed_callables_train mempool_kept}; do
      rec "X=1" $w
      rec "$E" $w
    done ;;
  ooms)
    rec "FRACTION=0.12 STACKS=1" gpt2_oom_backoff
    rec "FRACTION=0.12 $E" gpt2_oom_backoff
    rec "FRACTION=0.16" bert_varlen_oom
    rec "FRACTION=0.16 $E" bert_varlen_oom ;;
  deviceoom)  # the GPU itself runs out (cudaMalloc fails, no memory fraction): all but G GiB taken first
    rec "DEVICE_LEFT=9.6" gpt2_oom_backoff
    rec "DEVICE_LEFT=9.6 $E" gpt2_oom_backoff
    rec "DEVICE_LEFT=9.6 RECORD=late:1" gpt2_oom_backoff
    rec "DEVICE_LEFT=12.8" bert_varlen_oom
    rec "DEVICE_LEFT=12.8 $E" bert_varlen_oom
    rec "DEVICE_LEFT=12.8 MAX_ENTRIES=8000" bert_varlen_oom
    rec "DEVICE_LEFT=12.8 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128,garbage_collection_threshold:0.6" bert_varlen_oom ;;
  deviceoom2)  # more of the GPU running out: expandable late and in a ring, settings, and a state-only history
    rec "DEVICE_LEFT=9.6 RECORD=late:1 $E" gpt2_oom_backoff
    rec "DEVICE_LEFT=12.8 MAX_ENTRIES=20000 $E" bert_varlen_oom
    rec "DEVICE_LEFT=9.6 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.5,max_split_size_mb:64" gpt2_oom_backoff
    rec "DEVICE_LEFT=12.8 PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:4" bert_varlen_oom
    rec "DEVICE_LEFT=12.8 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128" bert_varlen_oom
    rec "RECORD=state" gpt2_train
    rec "RECORD=state $E" side_stream_prefetch ;;
  cudnn)  # cuDNN's benchmark mode: workspaces tried per algorithm, those that run out of memory skipped
    rec "CUDNN_BENCHMARK=1" resnet50_train
    rec "CUDNN_BENCHMARK=1 DEVICE_LEFT=7" resnet50_train
    rec "CUDNN_BENCHMARK=1 DEVICE_LEFT=7 $E" resnet50_train
    rec "CUDNN_BENCHMARK=1 FRACTION=0.085" resnet50_train
    rec "CUDNN_BENCHMARK=1 DEVICE_LEFT=7 RECORD=late:2" resnet50_train ;;
  graphtrees)  # torch.compile reduce-overhead training: CUDA graph trees' paths, the pool checkpointed between them
    rec "X=1" compile_graph_trees_train
    rec "$E" compile_graph_trees_train
    rec "RECORD=late:3" compile_graph_trees_train
    rec "RECORD=late:4 $E" compile_graph_trees_train
    rec "MAX_ENTRIES=400" compile_graph_trees_train ;;
  observer)  # the snapshot an out-of-memory observer takes inside malloc (the _atoom file), as PyTorch's docs suggest
    rec "DEVICE_LEFT=6" observer_oom_mlp
    rec "DEVICE_LEFT=6 $E" observer_oom_mlp
    rec "FRACTION=0.07" observer_oom_mlp
    rec "DEVICE_LEFT=6 MAX_ENTRIES=3000" observer_oom_mlp
    rec "DEVICE_LEFT=6 RECORD=late:3 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6,max_split_size_mb:256" observer_oom_mlp ;;
  workloads)  # other models and settings, each case of the groups above again on them
    rec "X=1" resnet50_train
    rec "RECORD=late:3 $E" resnet50_train
    rec "FRACTION=0.15 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8,max_split_size_mb:128" resnet50_train
    rec "MAX_ENTRIES=30000" llama_train_ckpt
    rec "RECORD=late:1 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]" llama_train_ckpt
    rec "FRACTION=0.2 MAX_ENTRIES=20000 $E" llama_train_ckpt
    rec "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128,max_non_split_rounding_mb:512 RECORD=late:1" bert_varlen_train
    rec "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.7 FRACTION=0.2" bert_varlen_oom
    rec "PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:[64:8,256:4,>:1] MAX_ENTRIES=20000" resnet50_train
    rec "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.5,max_split_size_mb:64 FRACTION=0.12 RECORD=late:1" gpt2_oom_backoff ;;
  lateprivate)  # the private-pool and OOM cases with a history begun late, a tiny ring, C++ frames
    rec "RECORD=late:2" graph_mlp_train
    rec "RECORD=late:2 $E" graph_mlp_train
    rec "RECORD=late:3" compile_reduce_overhead
    rec "RECORD=late:1" mempool_side
    rec "RECORD=late:1 $E" mempool_kept
    rec "RECORD=late:2" graph_shared_pool
    rec "STACKS=all MAX_ENTRIES=5000" side_stream_prefetch
    rec "MAX_ENTRIES=3" gpt2_train
    rec "RECORD=late:1 FRACTION=0.12 $E" gpt2_oom_backoff
    rec "RECORD=late:1" graphs_two_pools
    rec "RECORD=late:1 $E" graphs_two_pools
    rec "RECORD=late:2 $E" graphed_callables_train
    rec "RECORD=late:2 $E" graph_shared_pool
    rec "RECORD=late:1 $E" mempool_side
    rec "RECORD=late:1" mempool_kept
    rec "MAX_ENTRIES=150" graph_mlp_train
    rec "MAX_ENTRIES=150 $E" graph_mlp_train
    rec "MAX_ENTRIES=300 $E" compile_reduce_overhead
    rec "MAX_ENTRIES=700 $E" side_stream_prefetch
    rec "FRACTION=0.16 MAX_ENTRIES=8000" bert_varlen_oom
    rec "RECORD=late:2 FRACTION=0.12" gpt2_oom_backoff ;;
  gcfraction)  # garbage collection under a memory fraction and no OOM: the limit shows only in GC's releases
    rec "FRACTION=0.27 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6" bert_varlen_train
    rec "FRACTION=0.3 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.5 RECORD=late:2" gpt2_train
    rec "FRACTION=0.115 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6" resnet50_train
    rec "FRACTION=0.35 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.55 MAX_ENTRIES=20000" llama_train_ckpt
    rec "FRACTION=0.0375 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.5" side_stream_prefetch
    # the threshold set without a fraction (the collector never runs) and the program's empty_cache():
    # explicit, and torch.cuda.graph()'s before a capture; then both the collector and empty_cache()
    rec "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6" seed_examples
    rec "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6" graph_mlp_train
    rec "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6" graphs_two_pools
    rec "EMPTY_CACHE_EVERY=2 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6,max_split_size_mb:128" gpt2_train
    rec "EMPTY_CACHE_EVERY=3 FRACTION=0.27 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6" bert_varlen_train
    rec "EMPTY_CACHE_EVERY=2" resnet50_train
    rec "EMPTY_CACHE_EVERY=2 $E" resnet50_train
    rec "EMPTY_CACHE_EVERY=1 RECORD=late:1 $E" bert_varlen_train
    rec "EMPTY_CACHE_EVERY=1 RECORD=late:2 $E" gpt2_train
    rec "EMPTY_CACHE_EVERY=1 MAX_ENTRIES=5000 $E" side_stream_prefetch
    rec "EMPTY_CACHE_EVERY=2 FRACTION=0.2 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.6" llama_train_ckpt ;;
  mempoolvariants)  # MemPool(allocator=...), MemPool(use_on_oom=True) at the limit, MemPool(no_split=True)
    rec "X=1" mempool_allocator
    rec "$E" mempool_allocator
    rec "RECORD=late:1 $E" mempool_allocator
    rec "X=1" mempool_no_split
    rec "$E" mempool_no_split
    rec "RECORD=late:1" mempool_no_split
    rec "FRACTION=0.02" mempool_oom_fallback
    rec "FRACTION=0.02 $E" mempool_oom_fallback
    rec "FRACTION=0.02 OOM_POOL_ALLOCATOR=1 $E" mempool_oom_fallback
    rec "FRACTION=0.02 RECORD=late:1" mempool_oom_fallback
    rec "FRACTION=0.02 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6" mempool_oom_fallback
    rec "DEVICE_LEFT=1.6" mempool_oom_fallback
    rec "KEEP_POOLS=1 $E" mempool_allocator
    rec "KEEP_POOLS=1" mempool_no_split
    rec "KEEP_POOLS=1 $E" mempool_no_split
    rec "KEEP_POOLS=1 FRACTION=0.02 OOM_POOL_ALLOCATOR=1" mempool_oom_fallback
    rec "KEEP_POOLS=1 MAX_ENTRIES=60 FRACTION=0.02 $E OOM_POOL_ALLOCATOR=1" mempool_oom_fallback
    rec "X=1" mempool_nccl  # NCCL's allocator: PyTorch 2.11.0+cu130's NCCL refused it (not recorded)
    rec "$E" mempool_nccl ;;
  twogpus)  # needs two GPUs
    rec "X=1" two_devices
    rec "$E" two_devices
    rec "RECORD=late:2" two_devices ;;
  ranks)  # needs two GPUs: one snapshot per rank (ranks/), then compile's default mode on one GPU
    for w in ddp_train fsdp_train; do
      for c in "X=1" "$E" "RECORD=late:2"; do
        [ $w = fsdp_train ] && [ "$c" = "RECORD=late:2" ] && continue
        echo "== $c $w (torchrun, 2 ranks)"
        env $c python3 -m torch.distributed.run --nproc_per_node 2 "$(dirname "$0")/record_torch_traces.py" $w "$out" \
          >"$out/$w.$(echo "$c" | tr ' =:,' '_-__').log" 2>&1 || echo "FAILED: $c $w"
      done
    done
    rec "X=1" compile_dynamic
    rec "RECORD=late:2" compile_dynamic ;;
  ranks_oom)  # needs two GPUs: DDP with uneven data under a memory fraction, the larger rank running out (the H200 set,
    # pipeline parallel, and the check of `fraglab ranks`' predicted setting: scripts/record_ranks_job.sh)
    for c in "X=1" "$E"; do
      echo "== $c ddp_uneven_oom (torchrun, 2 ranks, FRACTION=${RANKS_FRACTION:-0.021})"
      env $c FRACTION=${RANKS_FRACTION:-0.021} STACKS=1 python3 -m torch.distributed.run --nproc_per_node 2 \
        "$(dirname "$0")/record_torch_traces.py" ddp_uneven_oom "$out" \
        >"$out/ddp_uneven_oom.$(echo "$c" | tr ' =:,' '_-__')_${RANKS_FRACTION:-0.021}.log" 2>&1 || echo "FAILED: $c ddp_uneven_oom"
    done ;;
  # What users bring that the groups above do not cover (groups probe_*, recorded on an H100 2026-11-26; five
  # groups that can run at once, each case a fresh process well under 10 GB of the GPU):
  probe_generate)  # HuggingFace generate() with a growing KV cache; a prefetcher under a fraction near its limit
    rec "X=1" llama_generate
    rec "$E" llama_generate
    rec "MAX_ENTRIES=3000" llama_generate
    rec "EMPTY_CACHE_EVERY=1 $E" llama_generate
    rec "FRACTION=0.05" prefetch_pressure
    rec "FRACTION=0.05 $E" prefetch_pressure ;;
  probe_compile)  # generate() with a static KV cache: transformers compiles decoding with reduce-overhead (CUDA graphs)
    rec "X=1" llama_generate_static
    rec "RECORD=late:1" llama_generate_static
    rec "$E" llama_generate_static ;;
  probe_settings)  # settings changed mid-run: _set_allocator_settings and set_per_process_memory_fraction
    rec "X=1" varlen_transformer_train
    rec "SET_SETTINGS_AT=3@expandable_segments:True" varlen_transformer_train
    rec "$E SET_SETTINGS_AT=2@expandable_segments:False|5@expandable_segments:True" varlen_transformer_train
    rec "SET_SETTINGS_AT=3@roundup_power2_divisions:4" varlen_transformer_train
    rec "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64 SET_SETTINGS_AT=4@max_split_size_mb:1024" varlen_transformer_train
    rec "FRACTION=0.1 SET_FRACTION_AT=3:0.06|6:0.1" varlen_transformer_train
    rec "FRACTION=0.12 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6 SET_FRACTION_AT=4:0.07" varlen_transformer_train ;;
  settings_toggle)  # expandable_segments turned off and on by the program: vLLM's sleep-mode pools, IPC-style
    rec "$E" sleep_mode_pools
    rec "$E POOL_PLAIN=1" sleep_mode_pools
    rec "$E DEFAULT_IN_WINDOW=1" sleep_mode_pools
    rec "$E RECORD=late:1" sleep_mode_pools
    rec "$E MAX_ENTRIES=400 DEFAULT_IN_WINDOW=1 POOL_PLAIN=1" sleep_mode_pools
    rec "$E KEEP_POOLS=1" sleep_mode_pools
    rec "$E SET_SETTINGS_AT=3@expandable_segments:False" varlen_transformer_train
    rec "RECORD=late:2 SET_SETTINGS_AT=1@expandable_segments:True" varlen_transformer_train
    rec "$E MAX_ENTRIES=4000 SET_SETTINGS_AT=2@expandable_segments:False|5@expandable_segments:True" varlen_transformer_train
    rec "FRACTION=0.08 $E SET_SETTINGS_AT=2@expandable_segments:False|6@expandable_segments:True" varlen_transformer_train
    rec "FRACTION=0.08 SET_SETTINGS_AT=3@expandable_segments:True" varlen_transformer_train ;;
  probe3)  # new models and an upward batch-size search with several OOMs, at a fraction and at the GPU's limit
    rec "FRACTION=0.1" batch_search
    rec "FRACTION=0.1 $E" batch_search
    rec "FRACTION=0.1 MAX_ENTRIES=3000" batch_search
    rec "DEVICE_LEFT=8" batch_search
    rec "DEVICE_LEFT=8 $E" batch_search
    rec "DEVICE_LEFT=8 RECORD=late:2" batch_search
    rec "DEVICE_LEFT=8 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6,max_split_size_mb:128" batch_search
    rec "X=1" vit_train
    rec "$E" vit_train
    rec "RECORD=late:2" vit_train
    rec "MAX_ENTRIES=5000" vit_train
    rec "FRACTION=0.06" vit_train
    rec "FRACTION=0.06 $E" vit_train ;;
  probe4)  # an inference server retrying OOM'd requests at half batch with empty_cache(); a UNet-like conv net growing its batch
    rec "X=1" infer_server
    rec "$E" infer_server
    rec "FRACTION=0.04" infer_server
    rec "DEVICE_LEFT=3" infer_server
    rec "DEVICE_LEFT=3 $E" infer_server
    rec "MAX_ENTRIES=4000 FRACTION=0.04" infer_server
    rec "FRACTION=0.1" unet_like
    rec "FRACTION=0.1 $E" unet_like
    rec "FRACTION=0.1 CUDNN_BENCHMARK=1" unet_like
    rec "DEVICE_LEFT=8 RECORD=late:2" unet_like
    rec "FRACTION=0.1 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.7,max_split_size_mb:64" unet_like ;;
  probe5)  # settings newer PyTorch reads from PYTORCH_ALLOC_CONF: a memory fraction, graph capture's stream reuse, the large segment size
    rec "PYTORCH_ALLOC_CONF=per_process_memory_fraction:0.12" gpt2_oom_backoff
    rec "PYTORCH_ALLOC_CONF=per_process_memory_fraction:0.12,expandable_segments:True RECORD=late:1" gpt2_oom_backoff
    rec "PYTORCH_ALLOC_CONF=per_process_memory_fraction:0.1,garbage_collection_threshold:0.6" resnet50_train
    rec "PYTORCH_ALLOC_CONF=graph_capture_record_stream_reuse:True" graph_side_capture
    rec "PYTORCH_ALLOC_CONF=graph_capture_record_stream_reuse:True" graphed_amp_train
    rec "PYTORCH_ALLOC_CONF=pinned_reserve_segment_size_mb:64,pinned_use_background_threads:True" ckpt_offload_sdpa
    rec "PYTORCH_ALLOC_CONF=large_segment_size_mb:40" gpt2_train
    rec "PYTORCH_ALLOC_CONF=large_segment_size_mb:64,expandable_segments:True" gpt2_train
    rec "PYTORCH_ALLOC_CONF=large_segment_size_mb:40 FRACTION=0.12" gpt2_oom_backoff
    rec "PYTORCH_ALLOC_CONF=expandable_segments:True,large_segment_size_mb:12 MAX_ENTRIES=30000" bert_varlen_train
    rec "PYTORCH_ALLOC_CONF=large_segment_size_mb:32,max_split_size_mb:64" resnet50_train ;;
  probe6)  # PyTorch 2.11's newer settings across the other cases: OOMs, CUDA graphs, MemPools, rings, late starts
    A=PYTORCH_ALLOC_CONF
    rec "$A=large_segment_size_mb:12 FRACTION=0.16" bert_varlen_oom
    rec "$A=large_segment_size_mb:100,expandable_segments:True DEVICE_LEFT=9.6" gpt2_oom_backoff
    rec "$A=large_segment_size_mb:40,expandable_segments:True" mempool_side
    rec "$A=large_segment_size_mb:32" graph_mlp_train
    rec "$A=per_process_memory_fraction:0.5" compile_reduce_overhead
    rec "$A=large_segment_size_mb:16 MAX_ENTRIES=3000" llama_generate
    rec "$A=large_segment_size_mb:48 FRACTION=0.04" infer_server
    rec "$A=large_segment_size_mb:40,expandable_segments:True" sleep_mode_pools
    rec "$A=max_split_size_mb:128,max_non_split_rounding_mb:64" vit_train
    rec "$A=roundup_power2_divisions:[64:4,256:2,>:8] FRACTION=0.1" unet_like
    rec "$A=per_process_memory_fraction:0.1,garbage_collection_threshold:0.7,max_split_size_mb:256" batch_search
    rec "$A=large_segment_size_mb:24 RECORD=late:2" amp_accum_prefetch
    rec "$A=large_segment_size_mb:40 MAX_ENTRIES=1000" side_stream_prefetch
    rec "$A=large_segment_size_mb:40 FRACTION=0.02" mempool_oom_fallback
    rec "$A=large_segment_size_mb:40 FRACTION=0.07" observer_oom_mlp
    rec "$A=per_process_memory_fraction:0.3" two_devices
    rec "$A=large_segment_size_mb:40 FRACTION=0.1" many_streams_raw ;;
  probe7)  # expandable segments with large pages other than 20 MiB: empty_cache, OOM recovery, a fraction, graphs
    A=PYTORCH_ALLOC_CONF
    X=expandable_segments:True
    rec "$A=$X,large_segment_size_mb:40 EMPTY_CACHE_EVERY=2" gpt2_train
    rec "$A=$X,large_segment_size_mb:64 FRACTION=0.12" gpt2_oom_backoff
    rec "$A=$X,large_segment_size_mb:32 FRACTION=0.16 MAX_ENTRIES=8000" bert_varlen_oom
    rec "$A=$X,large_segment_size_mb:24 DEVICE_LEFT=12.8" bert_varlen_oom
    rec "$A=$X,large_segment_size_mb:40" graph_mlp_train
    rec "$A=$X,large_segment_size_mb:40 FRACTION=0.07" observer_oom_mlp
    rec "$A=$X,large_segment_size_mb:48 FRACTION=0.05" prefetch_pressure
    rec "$A=$X,large_segment_size_mb:40,max_split_size_mb:128,garbage_collection_threshold:0.6 FRACTION=0.06" vit_train
    rec "$A=$X,large_segment_size_mb:40 RECORD=late:2 EMPTY_CACHE_EVERY=3" llama_train_ckpt
    rec "$A=$X,large_segment_size_mb:40 FRACTION=0.04 MAX_ENTRIES=4000" infer_server
    rec "$A=large_segment_size_mb:40,$X" mempool_allocator
    rec "$A=$X,large_segment_size_mb:40 FRACTION=0.02" mempool_oom_fallback ;;
  probe8)  # workloads not recorded before: detection (varying image sizes), beam search, sparse embeddings, MoE routing
    rec "X=1" detection_train
    rec "$E" detection_train
    rec "RECORD=late:2 MAX_ENTRIES=6000" detection_train
    rec "FRACTION=0.07" detection_train
    rec "X=1" t5_beam_generate
    rec "$E RECORD=late:1" t5_beam_generate
    rec "FRACTION=0.05 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.7,max_split_size_mb:64" t5_beam_generate
    rec "X=1" sparse_embedding_train
    rec "$E" sparse_embedding_train
    rec "PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:[256:1,512:2,>:4] RECORD=late:3" sparse_embedding_train
    rec "X=1" moe_train
    rec "$E FRACTION=0.04" moe_train
    rec "FRACTION=0.04" moe_train
    rec "MAX_ENTRIES=5000 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128" moe_train
    rec "RECORD=late:2 EMPTY_CACHE_EVERY=2 $E" moe_train
    rec "FRACTION=0.07 $E" detection_train
    rec "FRACTION=0.07 MAX_ENTRIES=3000 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6" detection_train
    rec "DEVICE_LEFT=6" detection_train
    rec "FRACTION=0.025" moe_train
    rec "FRACTION=0.025 $E" moe_train
    rec "DEVICE_LEFT=2.5 $E" moe_train
    rec "FRACTION=0.035" t5_beam_generate
    rec "FRACTION=0.035 RECORD=late:2 $E" t5_beam_generate ;;
  probe9)  # the GPU's own limit (all but G GiB taken first) across workloads: the driver's memory grows as kernels load
    rec "DEVICE_LEFT=8" vit_train
    rec "DEVICE_LEFT=8 $E" vit_train
    rec "DEVICE_LEFT=6 $E" detection_train
    rec "DEVICE_LEFT=5 RECORD=late:2" detection_train
    rec "DEVICE_LEFT=6 MAX_ENTRIES=4000 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128" detection_train
    rec "DEVICE_LEFT=2" moe_train
    rec "DEVICE_LEFT=2.5" t5_beam_generate
    rec "DEVICE_LEFT=2.5 $E" t5_beam_generate
    rec "DEVICE_LEFT=6" varlen_transformer_train
    rec "DEVICE_LEFT=6 $E" varlen_transformer_train
    rec "DEVICE_LEFT=5 PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:4" unet_like
    rec "DEVICE_LEFT=2.5 $E RECORD=late:1" infer_server
    rec "DEVICE_LEFT=1.2" prefetch_pressure
    rec "DEVICE_LEFT=3 PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.7" many_streams_raw ;;
  probe10)  # more of the GPU's own limit: expandable, late, rings, max_split_size_mb, 24 MiB pages, side streams
    rec "X=1" detection_train
    rec "X=1" moe_train
    rec "FRACTION=0.06" vit_train
    rec "DEVICE_LEFT=4 RECORD=late:2 MAX_ENTRIES=3000 $E" vit_train
    rec "DEVICE_LEFT=7 $E" detection_train
    rec "DEVICE_LEFT=3 RECORD=late:2 $E" varlen_transformer_train
    rec "DEVICE_LEFT=4 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64" varlen_transformer_train
    rec "DEVICE_LEFT=1.5 $E" prefetch_pressure
    rec "DEVICE_LEFT=1.2 RECORD=late:1" prefetch_pressure
    rec "DEVICE_LEFT=2 $E" many_streams_raw
    rec "DEVICE_LEFT=2.5 PYTORCH_ALLOC_CONF=expandable_segments:True,large_segment_size_mb:24" infer_server
    rec "DEVICE_LEFT=3 MAX_ENTRIES=6000" infer_server ;;
  probe11)  # expandable segments at the GPU's own limit: maps refused page by page as the driver's memory grows
    rec "DEVICE_LEFT=3 $E" varlen_transformer_train
    rec "DEVICE_LEFT=4 MAX_ENTRIES=4000 $E" varlen_transformer_train
    rec "DEVICE_LEFT=2 RECORD=late:1 $E" t5_beam_generate
    rec "DEVICE_LEFT=2.2 $E" moe_train
    rec "DEVICE_LEFT=2 $E" infer_server
    rec "DEVICE_LEFT=5 PYTORCH_ALLOC_CONF=expandable_segments:True,large_segment_size_mb:32" observer_oom_mlp
    rec "DEVICE_LEFT=4 $E" unet_like
    rec "DEVICE_LEFT=6 RECORD=late:1 $E" vit_train
    rec "DEVICE_LEFT=1.2 $E" prefetch_pressure
    rec "DEVICE_LEFT=3 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:64" varlen_transformer_train ;;
  probe12)  # the program's empty_cache() beside malloc's recoveries at the GPU's own limit
    rec "DEVICE_LEFT=6 EMPTY_CACHE_EVERY=2" varlen_transformer_train
    rec "DEVICE_LEFT=6 EMPTY_CACHE_EVERY=2 $E" varlen_transformer_train
    rec "DEVICE_LEFT=6 EMPTY_CACHE_EVERY=3 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128" varlen_transformer_train
    rec "DEVICE_LEFT=8 EMPTY_CACHE_EVERY=1" vit_train
    rec "DEVICE_LEFT=8 EMPTY_CACHE_EVERY=1 $E" vit_train
    rec "DEVICE_LEFT=2" infer_server
    rec "DEVICE_LEFT=2.5 MAX_ENTRIES=5000 $E" infer_server
    rec "DEVICE_LEFT=3 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128" infer_server
    rec "DEVICE_LEFT=1.5 EMPTY_CACHE_EVERY=1" prefetch_pressure
    rec "DEVICE_LEFT=2.5 EMPTY_CACHE_EVERY=2" t5_beam_generate ;;
  probe13)  # the GPU's own limit with CUDA graphs, NCCL buckets, many streams, MemPools, an upward batch search
    rec "DEVICE_LEFT=8" graphed_amp_train
    rec "DEVICE_LEFT=8 $E" graphed_amp_train
    rec "DEVICE_LEFT=20" nccl_bucketed
    rec "DEVICE_LEFT=6 $E" nccl_bucketed
    rec "DEVICE_LEFT=1.2" many_streams_raw
    rec "DEVICE_LEFT=0.35" graph_side_capture
    rec "DEVICE_LEFT=1.2 $E" mempool_oom_fallback
    rec "DEVICE_LEFT=8 RECORD=late:3 $E" batch_search
    rec "DEVICE_LEFT=6 MAX_ENTRIES=8000" batch_search ;;
  probe14)  # expandable segments at the GPU's limit with the program's own emptying: late, rings, max_split_size_mb
    rec "DEVICE_LEFT=1.8 MAX_ENTRIES=8000 $E" infer_server
    rec "DEVICE_LEFT=2.2 RECORD=late:1 $E" infer_server
    rec "DEVICE_LEFT=2.5 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128" infer_server
    rec "DEVICE_LEFT=6 $E" batch_search
    rec "DEVICE_LEFT=7 EMPTY_CACHE_EVERY=2 $E" vit_train
    rec "DEVICE_LEFT=4 EMPTY_CACHE_EVERY=2 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.6" varlen_transformer_train
    rec "DEVICE_LEFT=3 EMPTY_CACHE_EVERY=1 MAX_ENTRIES=3000 $E" varlen_transformer_train ;;
  probe15)  # empty_cache() inside use_mem_pool; the history stopped and restarted, cleared, its ring resized mid-run
    rec "X=1" mempool_empty_inside
    rec "$E" mempool_empty_inside
    rec "RECORD=late:1" mempool_empty_inside
    rec "MAX_ENTRIES=60" mempool_empty_inside
    rec "HISTORY_AT=2:off|3:on" gpt2_train
    rec "HISTORY_AT=2:clear $E" gpt2_train
    rec "HISTORY_AT=1:ring=1000" gpt2_train
    rec "MAX_ENTRIES=2000 HISTORY_AT=2:ring=5000" gpt2_train
    rec "MAX_ENTRIES=5000 HISTORY_AT=2:ring=800 $E" gpt2_train ;;
  probe15b)  # LoRA fine-tuning on a frozen model; a contrastive two-tower model with a batch-squared similarity matrix
    rec "X=1" lora_finetune
    rec "$E" lora_finetune
    rec "RECORD=late:2" lora_finetune
    rec "DEVICE_LEFT=3" lora_finetune
    rec "FRACTION=0.05 $E" lora_finetune
    rec "X=1" clip_contrastive
    rec "$E" clip_contrastive
    rec "MAX_ENTRIES=4000" clip_contrastive
    rec "DEVICE_LEFT=4" clip_contrastive
    rec "DEVICE_LEFT=4 $E" clip_contrastive
    rec "FRACTION=0.06" clip_contrastive ;;
  probe16)  # the GPU's limit moving mid-run: another process takes more (HOG_AT=K:-G) or gives some back (K:+G)
    rec "DEVICE_LEFT=8 HOG_AT=3:-3" varlen_transformer_train
    rec "DEVICE_LEFT=8 HOG_AT=3:-3 $E" varlen_transformer_train
    rec "DEVICE_LEFT=5 HOG_AT=4:+3" varlen_transformer_train
    rec "DEVICE_LEFT=5 HOG_AT=4:+3 $E" varlen_transformer_train
    rec "DEVICE_LEFT=5 HOG_AT=3:+3|6:-4" varlen_transformer_train
    rec "DEVICE_LEFT=5 HOG_AT=4:+3 RECORD=late:2" varlen_transformer_train
    rec "DEVICE_LEFT=5 HOG_AT=4:+3 MAX_ENTRIES=4000 $E" varlen_transformer_train
    rec "DEVICE_LEFT=4 HOG_AT=5:+2" infer_server
    rec "DEVICE_LEFT=4 HOG_AT=5:+2 $E" infer_server
    rec "DEVICE_LEFT=6 HOG_AT=2:+4" batch_search
    rec "DEVICE_LEFT=10 HOG_AT=3:-5 $E" batch_search ;;
  probe17)  # snapshots taken along one run (DUMP_AT); private pools at the GPU's limit or a fraction
    rec "DUMP_AT=2|4" gpt2_train
    rec "DUMP_AT=2|4 MAX_ENTRIES=3000 $E" gpt2_train
    rec "DUMP_AT=1|3 RECORD=late:1" llama_train_ckpt
    rec "DUMP_AT=3|6 DEVICE_LEFT=4" infer_server
    rec "DUMP_AT=2 X=1" graph_mlp_train
    rec "DEVICE_LEFT=3 $E" compile_graph_trees_train
    rec "DEVICE_LEFT=2" graphed_callables_train
    rec "FRACTION=0.03 $E" mempool_graph_capture
    rec "DEVICE_LEFT=1.5 $E" graph_shared_pool ;;
  probe18)  # an RLHF-style loop (generation and training alternating); a server with its KV cache taken up front
    rec "X=1" rlhf_loop
    rec "$E" rlhf_loop
    rec "RECORD=late:2" rlhf_loop
    rec "DEVICE_LEFT=5" rlhf_loop
    rec "FRACTION=0.07 $E" rlhf_loop
    rec "X=1" kv_prealloc_serve
    rec "$E" kv_prealloc_serve
    rec "DEVICE_LEFT=6" kv_prealloc_serve
    rec "DEVICE_LEFT=6 $E" kv_prealloc_serve
    rec "FRACTION=0.2 MAX_ENTRIES=3000" kv_prealloc_serve ;;
  issue39)  # expandable segments with max_split_size_mb, rounding and the collector on varying LM training; KV caches
             # grown by torch.cat under max_split_size_mb:128; a MemPool beside the default pools, deleted, then a burst
             # (recorded on an H200: the GC runs' fractions are 0.85 of the unlimited run's peak, the limit 0.8 of it)
    X128=PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128
    X64=PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:64,roundup_power2_divisions:4
    XGC=PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.6,max_split_size_mb:128
    M128=PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128
    for w in lm_varlen_bf16 varlen_transformer_train; do rec "$X128" $w; rec "$X64" $w; done
    rec "$XGC FRACTION=0.1867" lm_varlen_bf16
    rec "$XGC FRACTION=0.0664" varlen_transformer_train
    rec "$X128 DEVICE_LEFT=24.6" lm_varlen_bf16_val
    rec "$M128" kv_cat_serve
    rec "$X128" kv_cat_serve
    rec "$M128 DEVICE_LEFT=5" kv_cat_serve
    rec "$M128" kv_cat_serve_long
    for c in "X=1" "$E" "$M128" "$X128" "$X64"; do rec "$c" mempool_mixed_burst; done ;;
  probe_train)  # mixed precision with accumulation and copy streams; checkpointing with activation offloading
    rec "X=1" amp_accum_prefetch
    rec "RECORD=late:2 $E" amp_accum_prefetch
    rec "X=1" ckpt_offload_sdpa
    rec "$E" ckpt_offload_sdpa
    rec "MAX_ENTRIES=5000 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128" ckpt_offload_sdpa
    rec "MAX_ENTRIES=2000" amp_accum_prefetch ;;
  probe_streams)  # five streams, raw allocations, a second thread; a capture on a side stream with eager work beside
    rec "X=1" many_streams_raw
    rec "$E" many_streams_raw
    rec "FRACTION=0.1 PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256" many_streams_raw
    rec "X=1" graph_side_capture
    rec "$E" graph_side_capture
    rec "RECORD=late:1" graph_side_capture
    rec "FRACTION=0.1" graph_side_capture
    rec "FRACTION=0.1 $E" graph_side_capture
    rec "MAX_ENTRIES=200" graph_side_capture
    rec "FRACTION=0.1 KEEP_GRAPH=1" graph_side_capture
    rec "FRACTION=0.1 KEEP_GRAPH=1 $E" graph_side_capture
    rec "RECORD=late:3 $E" many_streams_raw ;;
  probe_fraction)  # the memory fraction lowered (OOMs after) or raised (OOMs before) mid-run; the collector turned on mid-run
    rec "FRACTION=0.12 SET_FRACTION_AT=3:0.05" varlen_transformer_train
    rec "FRACTION=0.05 SET_FRACTION_AT=4:0.12" varlen_transformer_train
    rec "FRACTION=0.1 SET_SETTINGS_AT=3@garbage_collection_threshold:0.5" varlen_transformer_train ;;
  probe_expfraction)  # expandable segments near a memory fraction (maps of 20 MiB pages past it); the offloaded KV cache
    rec "FRACTION=0.1 $E" varlen_transformer_train
    rec "FRACTION=0.07 $E" varlen_transformer_train
    rec "FRACTION=0.07 $E" prefetch_pressure
    rec "FRACTION=0.04 $E" prefetch_pressure
    rec "X=1" llama_generate_offloaded
    rec "$E" llama_generate_offloaded ;;
  # Groups probe2_* (four that can run at once on one GPU): private pools combined, max-autotune, graphed AMP
  # training beside OOMs, a world-size-1 NCCL group, expandable segments combined with other settings at OOMs.
  probe2_pools)  # a graph captured into a MemPool; two pools alternated, nested and used from a second thread; an observer with pools
    rec "X=1" mempool_graph_capture
    rec "$E" mempool_graph_capture
    rec "RECORD=late:1" mempool_graph_capture
    rec "MAX_ENTRIES=200" mempool_graph_capture
    rec "KEEP_POOLS=1 $E" mempool_graph_capture
    rec "X=1" mempool_nested_threads
    rec "$E" mempool_nested_threads
    rec "RECORD=late:1" mempool_nested_threads
    rec "KEEP_POOLS=1" mempool_nested_threads
    rec "FRACTION=0.07" observer_oom_pools
    rec "FRACTION=0.07 $E" observer_oom_pools
    rec "FRACTION=0.07 MAX_ENTRIES=2000" observer_oom_pools ;;
  probe2_compile)  # torch.compile(mode="max-autotune"): autotuning benchmarks, then CUDA graph trees
    rec "X=1" compile_max_autotune
    rec "$E" compile_max_autotune ;;
  probe2_train)  # make_graphed_callables with AMP, GradScaler and AdamW beside eager OOMs; bucketed NCCL all_reduce
    rec "FRACTION=0.05" graphed_amp_train
    rec "FRACTION=0.05 $E" graphed_amp_train
    rec "FRACTION=0.05 MAX_ENTRIES=1500" graphed_amp_train
    rec "X=1" nccl_bucketed
    rec "$E" nccl_bucketed
    rec "FRACTION=0.08" nccl_bucketed
    rec "FRACTION=0.08 $E" nccl_bucketed
    rec "FRACTION=0.08 RECORD=late:2" nccl_bucketed ;;
  probe2_settings)  # expandable segments with the collector, rounding or max_split_size under a fraction, at OOMs
    rec "FRACTION=0.12 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.6" gpt2_oom_backoff
    rec "FRACTION=0.12 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,roundup_power2_divisions:4" gpt2_oom_backoff
    rec "FRACTION=0.16 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128" bert_varlen_oom
    rec "FRACTION=0.12 MAX_ENTRIES=5000 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.6" gpt2_oom_backoff
    rec "FRACTION=0.12 RECORD=late:1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:64" gpt2_oom_backoff ;;
  skipactions)  # _record_memory_history(skip_actions=[...]) (PyTorch 2.11) of each kind, and record_function ranges kept
    rec "ANNOTATE=1" stream_steps
    rec "ANNOTATE=1 $E" stream_steps
    for a in free_completed free_requested alloc segment_alloc segment_free free_requested,free_completed snapshot; do
      rec "SKIP_ACTIONS=$a" stream_steps
    done
    for a in free_completed segment_map segment_unmap segment_map,segment_unmap; do
      rec "SKIP_ACTIONS=$a $E" stream_steps
    done
    rec "SKIP_ACTIONS=free_completed ANNOTATE=1 RECORD=late:2" stream_steps ;;
  large)  # the long histories the speed and GUI benchmarks open (bench/data/README.md)
    rec "STACKS=1" gpt2_generate
    rec "" gpt2_generate  # without stacks: issue 39's import target
    rec "STACKS=1 ROUNDS=${ROUNDS:-56}" gpt2_generate ;;  # 56 rounds: 11,968,495 entries, 1,148 MB of pickle
esac; done
ls -la "$out"
