#!/usr/bin/env bash
# Records, on a GPU machine, the ground truth of `fraglab fit` (tests/data/fit/README.md): probe snapshots of four
# programs at batches 2, 4 and 6 (default and expandable_segments:True, Python stacks), a sweep of batches under
# one memory fraction per program (one fresh process per batch and setting, several at once), the snapshots at
# the largest batch that fits and the first that fails, and a notebook cell's OOM snapshot.
# Usage: scripts/record_batch_probes.sh OUTDIR   (DRIVE_SECONDS=N bounds the drive, SLOTS=N the processes at
# once, PROGRAMS="causal_lm ..." picks programs). OUTDIR gets at most 8 files (tars of WORK=/tmp/fitrec).
set -uo pipefail
out=${1:?OUTDIR}
work=${WORK:-/tmp/fitrec}
rm -rf "$work"; mkdir -p "$work/logs" "$out"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
nvidia-smi >"$work/logs/nvidia-smi.txt" 2>&1
DRIVE_SECONDS=${DRIVE_SECONDS:-420} python3 "$(dirname "$0")/record_batch_probes.py" drive "$work" 2>&1 | tee "$work/drive.log"
cd "$work" || exit 1
for p in causal_lm vision varlen kv_server; do
  ls probes/$p.* >/dev/null 2>&1 && tar cf "$out/probes_$p.tar" probes/$p.*
done
tar cf "$out/sweep_keep.tar" sweep_keep notebook 2>/dev/null
tar czf "$out/results.tar.gz" sweep.jsonl plan.json summary.json drive.log logs 2>/dev/null
cp sweep.jsonl "$out/" 2>/dev/null
du -sh probes sweep_all sweep_keep notebook 2>/dev/null
ls -la "$out"
