#!/usr/bin/env bash
# Every peer allocator against fraglab's model of it, on the same op lists (docs/peers.md).
#
#   tools/peers/run.sh prepare [TRACE...]   here, with a fraglab build: op lists and the models'
#                                           predictions into .device-carry/peers/{ops,model}
#   tools/peers/run.sh device               on the GPU machine (from the repository root, with
#                                           .device-carry carried): builds the runners, runs
#                                           every peer on every op list into
#                                           .device-carry/peers/real, writes docs/peers.md
#   tools/peers/run.sh table                docs/peers.md again from the stored results
#                                           (.device-carry/peers/real, else docs/peers-results.jsonl)
#
# prepare's traces default to traces/corpus/*.pickle.gz; FRAGLAB (default build/fraglab).
# The RMM, rapids-logger and spdlog sources must be in place first: tools/peers/fetch_sources.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
dir=.device-carry/peers
fraglab=${FRAGLAB:-build/fraglab}

# name | runner command (OPS is replaced) | model policy string
configs() {
  cat <<'CONF'
rmm_pool|$bin/rmm_reference OPS pool|rmm_pool
rmm_arena|$bin/rmm_reference OPS arena|rmm_arena
rmm_binning|$bin/rmm_reference OPS binning|rmm_binning
cuda_async|$bin/async_reference OPS --threshold 0|cuda_async:sync_after_free=false
cuda_async.sync|$bin/async_reference OPS --threshold 0 --sync-after-free|cuda_async
cuda_async.max|$bin/async_reference OPS --threshold max|cuda_async:release_threshold=281474976710656
cupy|python3 tools/peers/cupy_reference.py OPS|cupy
bfc|python3 tools/peers/jax_bfc_reference.py OPS|bfc
CONF
}

prepare() {
  mkdir -p "$dir/ops" "$dir/model"
  local traces=("$@")
  [ ${#traces[@]} -gt 0 ] || traces=(traces/corpus/*.pickle.gz)
  for t in "${traces[@]}"; do
    local name
    name=$(basename "$t"); name=${name%%.pickle.gz}
    "$fraglab" ops "$t" -o "$dir/ops/$name.ops" > /dev/null
    configs | while IFS='|' read -r cfg _ policy; do
      "$fraglab" replay "$t" --policy "$policy" --json > "$dir/model/$name@$cfg.json" || true
    done
  done
  "$fraglab" --version > "$dir/model/FRAGLAB_VERSION" 2>&1 || true
}

device() {
  local bin=$dir/bin
  tools/peers/build.sh "$bin"
  mkdir -p "$dir/real"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$dir/real/GPU" || true
  for ops in "$dir"/ops/*.ops; do
    local name
    name=$(basename "$ops" .ops)
    configs | while IFS='|' read -r cfg cmd _; do
      cmd=${cmd//\$bin/$bin}
      echo "== $name $cfg" >&2
      # shellcheck disable=SC2086
      ${cmd//OPS/$ops} > "$dir/real/$name@$cfg.json" 2> "$dir/real/$name@$cfg.err" || true
    done
  done
  "$bin/async_probe" > "$dir/real/async_probe.jsonl" || true
  python3 tools/peers/peers_table.py --collect "$dir"
  table
}

table() {
  python3 tools/peers/peers_table.py "$dir" > docs/peers.md.tmp && mv docs/peers.md.tmp docs/peers.md
  echo "wrote docs/peers.md" >&2
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  device) device ;;
  table) table ;;
  *) echo "usage: $0 prepare [TRACE...] | device | table" >&2; exit 2 ;;
esac
