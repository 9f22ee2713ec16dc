#!/usr/bin/env bash
# The real-GPU runs behind docs/gpu.md: the bundled corpus replayed on a GPU with every
# allocator of interest, plus PyTorch's own allocator (bench/torch_reference) on the same
# op lists. Needs a GPU, a fraglab built with CUDA, and (for the reference) PyTorch + CMake.
#   scripts/gpu-replay.sh [FRAGLAB] [OUT] [WORKLOADS...]
# Writes OUT/<workload>.<run>.json (one JSON document each) and OUT/gpu.txt; then
# scripts/gpu_tables.py OUT prints the tables.
set -uo pipefail
FRAGLAB=${1:-build/fraglab}
OUT=${2:-gpu-results}
shift 2 || true
WORKLOADS=("${@:-gpt2_train}")
CORPUS=traces/corpus
REF_BUILD=${REF_BUILD:-/tmp/torch_reference_build}
mkdir -p "$OUT"

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  date -u; } > "$OUT/gpu.txt" 2>&1

REF=""
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null) &&
  cmake -S "${REF_SRC:-bench/torch_reference}" -B "$REF_BUILD" -DCMAKE_PREFIX_PATH="$prefix" > "$OUT/torch_reference.build.log" 2>&1 &&
  cmake --build "$REF_BUILD" -j >> "$OUT/torch_reference.build.log" 2>&1 && REF="$REF_BUILD/torch_reference"

run() {  # run NAME ARGS...: one fraglab replay on the GPU, JSON to OUT/NAME.json
  local name=$1; shift
  echo "== $name: $FRAGLAB replay $*"
  "$FRAGLAB" replay "$@" --device cuda --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  echo "   exit $?"
}

for w in "${WORKLOADS[@]}"; do
  d=$CORPUS/$w.default.pickle.gz
  e=$CORPUS/$w.expandable.pickle.gz
  for p in pytorch passthrough cuda_malloc cuda_malloc_async bestfit tlsf; do run "$w.default.$p" "$d" -p "$p"; done
  run "$w.expandable.pytorch" "$e" -p pytorch:expandable_segments:True
  run "$w.default.pytorch.touch" "$d" -p pytorch --touch
  # A capacity below what the run needs: the out-of-memory must come where the simulator says.
  run "$w.default.pytorch.cap" "$d" -p pytorch --capacity "${CAPACITY:-14GiB}"
  if [ -n "$REF" ]; then
    "$FRAGLAB" ops "$d" -o "/tmp/$w.default.ops" > /dev/null
    "$FRAGLAB" ops "$e" -o "/tmp/$w.expandable.ops" > /dev/null
    echo "== $w torch_reference"
    env -u PYTORCH_CUDA_ALLOC_CONF "$REF" "/tmp/$w.default.ops" > "$OUT/$w.default.torch_reference.json"
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$REF" "/tmp/$w.expandable.ops" \
      > "$OUT/$w.expandable.torch_reference.json"
  fi
done
