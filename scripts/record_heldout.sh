#!/usr/bin/env bash
# Records, on a GPU machine, the held-out ground truth of `fraglab fit` (tests/data/fit/heldout/README.md): the
# drive of scripts/record_batch_probes.py for vit_train, llama_ckpt and t5_train (probes at batches 2, 4, 6 under
# the defaults with Python stacks; a sweep under one fraction per program, defaults and expandable_segments:True;
# no notebook), and beside it scripts/hook_probe_check.py (fraglab_hook.probe and the OOM hook on causal_lm).
# Usage: scripts/record_heldout.sh OUTDIR FRAGLAB_DIR   (FRAGLAB_DIR holds the fraglab binary and the shared
# libraries it needs; DRIVE_SECONDS=N bounds the drive). OUTDIR gets a few tars (of WORK=/tmp/heldout).
set -uo pipefail
out=${1:?OUTDIR}
fl=$(cd "${2:?FRAGLAB_DIR}" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-/tmp/heldout}
rm -rf "$work" "$work-hook"; mkdir -p "$work/logs" "$work-hook" "$out"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
chmod +x "$fl/fraglab"
nvidia-smi >"$work/logs/nvidia-smi.txt" 2>&1
LD_LIBRARY_PATH="$fl" "$fl/fraglab" --version >"$work-hook/fraglab_version.txt" 2>&1
(PYTHONPATH="$repo/python" python3 "$repo/scripts/hook_probe_check.py" --fraglab "$fl/fraglab" --libdir "$fl" \
   --out "$work-hook" >"$work-hook/stdout.txt" 2>&1; echo "rc=$?" >>"$work-hook/stdout.txt") &
hook=$!
PROGRAMS=vit_train,llama_ckpt,t5_train PROBE_CONFS=default NOTEBOOK=0 DRIVE_SECONDS=${DRIVE_SECONDS:-360} \
  python3 "$repo/scripts/record_batch_probes.py" drive "$work" 2>&1 | tee "$work/drive.log"
wait $hook
tail -40 "$work-hook/stdout.txt"
cd "$work" || exit 1
tar czf "$out/heldout.tar.gz" probes sweep_keep sweep.jsonl plan.json summary.json drive.log logs 2>/dev/null
cp sweep.jsonl summary.json "$out/" 2>/dev/null
cd "$work-hook" && tar czf "$out/hook.tar.gz" . && cp hook_probe_check.txt "$out/" 2>/dev/null
du -sh "$work"/probes "$work"/sweep_keep "$work"/sweep_all "$work-hook" 2>/dev/null
ls -la "$out"
