#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each reader's fuzzer for
# a bounded number of runs on seeds made from the bundled traces. A crash, a sanitizer report or
# an allocation over 2 GiB fails the run; the input is left in <build>/fuzz-out/findings/ — fix the
# reader and add the input to tests/data/fuzz-regressions/ so the normal suite replays it.
#
# CI runs a fixed libFuzzer seed (FUZZ_SEED, default 1) and a fixed number of runs per target
# (FUZZ_RUNS_SCALE scales them; 1 is a few CPU-minutes in all), so a CI result
# can be reproduced exactly. Exploration is a separate, longer session by hand:
#   FUZZ_SEED=0 FUZZ_RUNS_SCALE=20 scripts/fuzz.sh      (0 = a random seed)
# or a fixed number of runs for every target, on inputs cut to FUZZ_MAX_LEN bytes (libFuzzer truncates the
# seeds; short inputs run thousands of times a second, so 10^6 runs fit in minutes), FUZZ_JOBS at a time:
#   FUZZ_SEED=0 FUZZ_RUNS=1000000 FUZZ_MAX_LEN=4096 FUZZ_JOBS=2 scripts/fuzz.sh   (docs/limits.md)
# FUZZ_TARGETS picks some of the targets (space-separated; default all five).
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${FUZZ_SEED:-1}
scale=${FUZZ_RUNS_SCALE:-1}
read -ra targets <<<"${FUZZ_TARGETS:-fuzz_pickle fuzz_native fuzz_jsonl fuzz_rmm_csv fuzz_json_snapshot}"

# FUZZ_BUILD: a build configured with FRAGLAB_FUZZ=ON already (scripts/test.sh passes its sanitizer
# build, which has the targets); by default build-fuzz, configured here.
build=${FUZZ_BUILD:-build-fuzz}
if [ -z "${FUZZ_BUILD:-}" ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DFRAGLAB_FUZZ=ON -DFRAGLAB_TESTS=OFF -DFRAGLAB_BENCH=OFF -DFRAGLAB_GUI=OFF \
    -DFRAGLAB_CUDA=OFF >/dev/null
fi
# The seeds are converted by a fraglab command line: FRAGLAB_CLI (scripts/test.sh passes its Release
# build's), else this build's.
cli=${FRAGLAB_CLI:-$build/fraglab}
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" $([ -n "${FRAGLAB_CLI:-}" ] || echo fraglab)

seeds=$build/fuzz-seeds
out=$build/fuzz-out
rm -rf "$seeds" "$out" && mkdir -p "$seeds"/{pickle,native,jsonl,csv,json} "$out"/findings
for f in traces/corpus/seed_examples.*.pickle.gz traces/corpus/side_stream_prefetch.*.pickle.gz; do
  base=$(basename "$f" .pickle.gz)
  gzip -dc "$f" >"$seeds/pickle/$base.pickle"
  ASAN_OPTIONS=detect_leaks=0 "$cli" convert "$f" "$seeds/native/$base.fltrace" >/dev/null
  ASAN_OPTIONS=detect_leaks=0 "$cli" convert "$f" "$seeds/jsonl/$base.jsonl" >/dev/null
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

# A long run (FUZZ_RUNS) leaves the decompression and alias bombs out: each takes up to seconds, their
# mutants too, and they would hold the pickle target to ~150 inputs a second instead of ~1,300; the normal
# suite replays them (tests/data/fuzz-regressions).
if [ -n "${FUZZ_RUNS:-}" ]; then rm -f "$seeds"/*/*bomb* "$seeds"/*/*alias*; fi
max_len=${FUZZ_MAX_LEN:-262144}
jobs_at_once=${FUZZ_JOBS:-$(nproc)}
run() {  # target seed-dir runs: the fuzzer's summary goes to <build>/fuzz-out/<target>.summary
  local runs=${FUZZ_RUNS:-$(($3 * scale))}
  {
    echo "== $1: $runs runs, seed $seed, inputs up to $max_len bytes"
    local began=$SECONDS
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
      "$build"/fuzz/"$1" -seed="$seed" -runs="$runs" -max_total_time="${FUZZ_MAX_TIME:-$((600 * scale))}" -max_len="$max_len" \
      -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=30 -print_final_stats=1 \
      -artifact_prefix="$out"/findings/"$1"- "$2" >"$out"/"$1".log 2>&1 || true
    grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY)|runtime error" \
      "$out"/"$1".log || true
    echo "wall time: $((SECONDS - began)) s"
  } >"$out"/"$1".summary
}
# Run counts: about 6 CPU-minutes in all, 2 minutes of wall time on CI's 2-core machine (executions per
# second in scripts/test.sh's -O1 sanitizer build, measured in a CI run: pickle 122, native 3,750, JSON
# Lines 230, RMM CSV 606, JSON snapshot 86). The targets run side by side, one per core: each run is fixed
# by its seed and run count, so the result is the same as one after another.
declare -A runs=([fuzz_pickle]=15000 [fuzz_native]=90000 [fuzz_jsonl]=15000 [fuzz_rmm_csv]=60000
                 [fuzz_json_snapshot]=4000)
declare -A dirs=([fuzz_pickle]=pickle [fuzz_native]=native [fuzz_jsonl]=jsonl [fuzz_rmm_csv]=csv
                 [fuzz_json_snapshot]=json)
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do wait -n || true; done
  run "$t" "$seeds/${dirs[$t]}" "${runs[$t]}" &
done
wait
status=0
for t in "${targets[@]}"; do
  cat "$out"/"$t".summary
  if ls "$out"/findings/"$t"-* >/dev/null 2>&1; then
    echo "fuzz: $t found a crash: $(ls "$out"/findings/"$t"-*) (log: $out/$t.log)" >&2
    status=1
  fi
done
exit $status
