#!/usr/bin/env bash
# Alternates two fraglab_bench binaries (old, new) on one benchmark filter, RUNS times each, and
# prints the CPU and real time of every run, the events it replayed, and the load average: on a shared
# machine only alternated runs compare, and CPU time is the figure to use when the load is high.
# bench/ab_table.py turns the output into docs/performance.md's table.
#   scripts/bench_ab.sh OLD_BENCH NEW_BENCH FILTER [RUNS=3]
# Extra traces as for scripts/bench.sh: FRAGLAB_BENCH_TRACES=a.fltrace:b.pickle.gz.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 OLD_BENCH NEW_BENCH FILTER [RUNS]" >&2
  exit 2
fi
old=$1 new=$2 filter=$3 runs=${4:-3}
for ((i = 1; i <= runs; ++i)); do
  for side in old new; do
    bin=$old
    [ "$side" = new ] && bin=$new
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    "$bin" --benchmark_filter="$filter" --benchmark_format=csv 2>/dev/null | grep '^"' |
      awk -F, -v side="$side" -v load="$load" '{gsub(/"/, "", $1); ev = ($7 != "" ? sprintf(" events=%.0f", $7 * $3 / 1000) : "");
        printf "%s %s real_ms=%s cpu_ms=%s%s load=%s\n", side, $1, $3, $4, ev, load}'
  done
done
