#!/usr/bin/env bash
# Runs the benchmarks in a Release build and prints the Markdown tables for docs/performance.md
# (medians of REPS repetitions, default 5). Extra traces: FRAGLAB_BENCH_TRACES=a.fltrace:b.pickle.gz.
# Arguments are passed to the benchmark binary (e.g. --benchmark_filter=replay/pytorch).
# The summary ends with the every-policy >= 5M events/s check on bert_varlen_train.default;
# BENCH_CHECK=1 makes a miss the exit status (1).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DFRAGLAB_TESTS=OFF >/dev/null
cmake --build build-release -j "$(nproc)" --target fraglab fraglab_bench
out=build-release/bench-results.json
build-release/bench/fraglab_bench --benchmark_repetitions="${REPS:-5}" --benchmark_report_aggregates_only=true \
  --benchmark_format=json --benchmark_out="$out" --benchmark_out_format=json "$@" >/dev/null
python3 bench/summarize.py ${BENCH_CHECK:+--check} "$out"
