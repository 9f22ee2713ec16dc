#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run) after scripts/setup-debian.sh:
#  1. build with warnings as errors and run every test through ctest;
#  2. a benchmark smoke run (tiny input, no thresholds) so benchmarks keep building and running;
#     docs/cluster.md's Slurm job array and merge on a real single-node Slurm (scripts/test-slurm.sh);
#  3. the test suite again under AddressSanitizer + UndefinedBehaviorSanitizer;
#  4. each reader's libFuzzer target for a fixed number of runs from a fixed seed (scripts/fuzz.sh).
# FRAGLAB_QUICK=1 runs step 1 only (for development).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRAGLAB_WERROR=ON
cmake --build build-test -j "$jobs"
ctest --test-dir build-test --output-on-failure -j "$jobs"
[ "${FRAGLAB_QUICK:-0}" = 1 ] && exit 0

echo "== benchmark smoke run"
FRAGLAB_BENCH_SMOKE=1 build-test/bench/fraglab_bench --benchmark_min_time=0.01 >/dev/null
echo "benchmarks: smoke run passed"

echo "== the cluster path: Slurm job array + merge on a real single-node Slurm (skipped unless root)"
FRAGLAB=build-test/fraglab ./scripts/test-slurm.sh

echo "== test suite under AddressSanitizer + UndefinedBehaviorSanitizer"
# No -Werror here: GCC 12 reports false -Wmaybe-uninitialized inside Catch2 under -fsanitize.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFRAGLAB_SANITIZE=ON -DFRAGLAB_BENCH=OFF \
  -DFRAGLAB_GUI=OFF -DFRAGLAB_CUDA=OFF
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -E "tune predicts the peaks"
# (The tune acceptance test replays ~70 settings of two traces: minutes in Release, far longer in a
# Debug+ASan build; the search code it runs is covered under the sanitizers by the other [compare] tests.)

echo "== fuzzing each reader"
./scripts/fuzz.sh
