#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each reader's fuzzer for
# a bounded number of runs on seeds made from the bundled traces. A crash, a sanitizer report or
# an allocation over 2 GiB fails the run; the input is left in build-fuzz/findings/ — fix the
# reader and add the input to tests/data/fuzz-regressions/ so the normal suite replays it.
#
# CI runs a fixed libFuzzer seed (FUZZ_SEED, default 1) and a fixed number of runs per target
# (FUZZ_RUNS_SCALE scales them; 1 is about a minute each on a 2-core CI machine), so a CI result
# can be reproduced exactly. Exploration is a separate, longer session by hand:
#   FUZZ_SEED=0 FUZZ_RUNS_SCALE=20 scripts/fuzz.sh      (0 = a random seed)
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${FUZZ_SEED:-1}
scale=${FUZZ_RUNS_SCALE:-1}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DFRAGLAB_FUZZ=ON -DFRAGLAB_TESTS=OFF -DFRAGLAB_BENCH=OFF -DFRAGLAB_GUI=OFF \
  -DFRAGLAB_CUDA=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)"

seeds=build-fuzz/seeds
rm -rf "$seeds" build-fuzz/findings && mkdir -p "$seeds"/{pickle,native,jsonl,csv,json} build-fuzz/findings
for f in traces/corpus/seed_examples.*.pickle.gz traces/corpus/side_stream_prefetch.*.pickle.gz; do
  base=$(basename "$f" .pickle.gz)
  gzip -dc "$f" >"$seeds/pickle/$base.pickle"
  ASAN_OPTIONS=detect_leaks=0 build-fuzz/fraglab convert "$f" "$seeds/native/$base.fltrace" >/dev/null
  ASAN_OPTIONS=detect_leaks=0 build-fuzz/fraglab convert "$f" "$seeds/jsonl/$base.jsonl" >/dev/null
done
# Short JSONL seeds too: a 160 KB line file runs ~100 times a second, its first lines ~10,000.
for f in "$seeds"/jsonl/*.jsonl; do head -n 40 "$f" >"${f%.jsonl}.head.jsonl"; done
cp tests/data/recorder/*.jsonl tests/data/fuzz-regressions/*.jsonl tests/data/fuzz-regressions/*.jsonl.gz "$seeds/jsonl/"
cp tests/data/fuzz-regressions/*.fltrace "$seeds/native/"
# The hostile pickles (alias and decompression bombs, issue 15): the pickle target reads gzip too.
cp tests/data/fuzz-regressions/*.pickle tests/data/fuzz-regressions/*.pickle.gz "$seeds/pickle/"
cp tests/data/*.csv tests/data/fuzz-regressions/*.csv "$seeds/csv/" 2>/dev/null || true
# JSON snapshots: the bundled one whole, and its first 4 KB (a few trace entries, cut mid-value).
for f in tests/data/encodings/*.json.gz; do
  base=$(basename "$f" .json.gz)
  gzip -dc "$f" >"$seeds/json/$base.json"
  head -c 4096 "$seeds/json/$base.json" >"$seeds/json/$base.head.json"
done

run() {  # target seed-dir runs
  local runs=$(($3 * scale))
  echo "== $1: $runs runs, seed $seed"
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    build-fuzz/fuzz/"$1" -seed="$seed" -runs="$runs" -max_total_time=$((600 * scale)) -max_len=262144 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=30 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/findings/"$1"- "$2" >build-fuzz/"$1".log 2>&1 || true
  grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::average_exec_per_sec|==[0-9]+==ERROR|SUMMARY)|runtime error" \
    build-fuzz/"$1".log || true
  if ls build-fuzz/findings/"$1"-* >/dev/null 2>&1; then
    echo "fuzz: $1 found a crash: $(ls build-fuzz/findings/"$1"-*) (log: build-fuzz/$1.log)" >&2
    return 1
  fi
}
# Run counts: about a minute each on CI's 2-core machine (executions per second measured there).
status=0
run fuzz_pickle "$seeds/pickle" 60000 || status=1
run fuzz_native "$seeds/native" 90000 || status=1
run fuzz_jsonl "$seeds/jsonl" 40000 || status=1
run fuzz_rmm_csv "$seeds/csv" 400000 || status=1
run fuzz_json_snapshot "$seeds/json" 8000 || status=1
exit $status
