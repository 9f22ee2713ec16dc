#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each reader's fuzzer for
# FUZZ_SECONDS (default 60) on seeds made from the bundled traces. A crash stops the run with
# a non-zero exit; the input is left in build-fuzz/findings/ — add it to
# tests/data/fuzz-regressions/ so the normal suite replays it forever after.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DFRAGLAB_FUZZ=ON -DFRAGLAB_TESTS=OFF -DFRAGLAB_BENCH=OFF -DFRAGLAB_GUI=OFF \
  -DFRAGLAB_CUDA=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)"

seeds=build-fuzz/seeds
rm -rf "$seeds" && mkdir -p "$seeds"/{pickle,native,jsonl,csv} build-fuzz/findings
for f in traces/corpus/seed_examples.*.pickle.gz traces/corpus/side_stream_prefetch.*.pickle.gz; do
  base=$(basename "$f" .pickle.gz)
  gzip -dc "$f" >"$seeds/pickle/$base.pickle"
  ASAN_OPTIONS=detect_leaks=0 build-fuzz/fraglab convert "$f" "$seeds/native/$base.fltrace" >/dev/null
  ASAN_OPTIONS=detect_leaks=0 build-fuzz/fraglab convert "$f" "$seeds/jsonl/$base.jsonl" >/dev/null
done
cp tests/data/*.jsonl "$seeds/jsonl/" 2>/dev/null || true
cp tests/data/*.csv "$seeds/csv/" 2>/dev/null || true

run() {  # target seed-dir
  echo "== $1 for ${seconds}s"
  build-fuzz/fuzz/"$1" -max_total_time="$seconds" -max_len=262144 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/findings/"$1"- "$2" 2>&1 | grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" || true
  if ls build-fuzz/findings/"$1"-* >/dev/null 2>&1; then
    echo "fuzz: $1 found a crash: $(ls build-fuzz/findings/"$1"-*)" >&2
    return 1
  fi
}
status=0
run fuzz_pickle "$seeds/pickle" || status=1
run fuzz_native "$seeds/native" || status=1
run fuzz_jsonl "$seeds/jsonl" || status=1
run fuzz_rmm_csv "$seeds/csv" || status=1
exit $status
