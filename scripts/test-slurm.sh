#!/usr/bin/env bash
# The cluster path of docs/cluster.md on a real Slurm: start a single-node Slurm on this machine
# (scripts/slurm-local.sh), submit the documented job array scripts/slurm/compare.sbatch (one
# `fraglab compare --shard K/N` per task) and scripts/slurm/merge.sbatch after it (afterok), wait, and check
# that the merged results.csv and results.json are byte-identical to one plain `fraglab compare` run with
# the same arguments: the whole bundled corpus (traces/corpus), every policy and the documented grid.
#
#   FRAGLAB=path/to/fraglab scripts/test-slurm.sh      (default: build/fraglab; CI passes the installed one)
#   FRAGLAB_SLURM_SHARDS=3                             number of shards (array tasks)
#   FRAGLAB_SLURM_TIMEOUT=600                          seconds to wait for the array and the merge
#
# First, always: the job files shown in docs/cluster.md must be these files, line for line. Then, where
# Slurm cannot start (not root, Slurm or munge not installed), it says why and exits 0 (skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
FRAGLAB=$(realpath "${FRAGLAB:-build/fraglab}")
export FRAGLAB

# The ```bash block that follows the first line of docs/cluster.md naming the job file.
doc_block() {
  awk -v name="$1" 'index($0, name) && !seen { seen = 1; next }
                    seen && !inside && /^```bash$/ { inside = 1; next }
                    inside && /^```$/ { exit }
                    inside { print }' docs/cluster.md
}

check_docs() {
  local file
  for file in scripts/slurm/compare.sbatch scripts/slurm/merge.sbatch; do
    if ! diff -u <(doc_block "$file") "$file"; then
      echo "docs/cluster.md shows a different $file (above: - docs, + file); copy the file into the docs" >&2
      exit 1
    fi
  done
  echo "slurm: the job files in docs/cluster.md match scripts/slurm/"
}

# Runs inside a started Slurm (SLURM_CONF set by slurm-local.sh run).
run_array() {
  local shards=${FRAGLAB_SLURM_SHARDS:-3} timeout=${FRAGLAB_SLURM_TIMEOUT:-600} work array status=0 t0
  work=$(mktemp -d /tmp/fraglab-slurm-test.XXXXXX)
  trap 'rm -rf "$work"' RETURN
  export FRAGLAB_CORPUS=$root/traces/corpus FRAGLAB_RUNS=$work/runs FRAGLAB_SHARDS=$shards
  cd "$work"
  mkdir logs
  t0=$SECONDS
  # The documented submission; only the sizes differ from the file's defaults (N, a CPU and 1 GiB a task).
  array=$(sbatch --parsable --array="1-$shards" --cpus-per-task=1 --mem=1G "$root/scripts/slurm/compare.sbatch" run1)
  echo "slurm: array job $array ($shards shards) submitted; merge waits on it (afterok)"
  timeout "$timeout" sbatch --wait --dependency="afterok:$array" "$root/scripts/slurm/merge.sbatch" run1 \
    >/dev/null || status=$?
  if [ "$status" != 0 ] || [ ! -f runs/run1/merged/results.json ]; then
    echo "slurm: the array or the merge failed (sbatch --wait: status $status; no merged results); job states and logs:" >&2
    show_jobs "$array"
    tail -n 30 logs/* >&2 || true
    return 1
  fi
  echo "slurm: array + merge done in $((SECONDS - t0))s"

  "$FRAGLAB" compare "$FRAGLAB_CORPUS" --policies all --grid 'pytorch:max_split_size_mb:{64,128,256}' \
    -o single --quiet
  local f
  for f in results.csv results.json; do
    if ! cmp "single/$f" "runs/run1/merged/$f"; then
      echo "slurm: merged $f differs from one compare run" >&2
      diff <(head -c 20000 "single/$f") <(head -c 20000 "runs/run1/merged/$f") | head -n 20 >&2
      return 1
    fi
  done
  echo "slurm: merged results.csv ($(($(wc -l <single/results.csv) - 1)) rows) and results.json are" \
       "byte-identical to one compare run"
}

show_jobs() {
  squeue --all --format='%i %j %T %r' >&2 || true
  scontrol show job "$1" 2>/dev/null | grep -E 'JobState|Reason' >&2 || true
}

case "${1:-}" in
  --inside) run_array ;;
  "")
    check_docs
    if ! reason=$(scripts/slurm-local.sh check); then
      echo "slurm: SKIPPED the job-array test: ${reason#slurm-local: }"
      exit 0
    fi
    [ -x "$FRAGLAB" ] || { echo "slurm: no fraglab at $FRAGLAB (set FRAGLAB=...)" >&2; exit 1; }
    scripts/slurm-local.sh run "$0" --inside ;;
  *) echo "usage: [FRAGLAB=...] scripts/test-slurm.sh" >&2; exit 2 ;;
esac
