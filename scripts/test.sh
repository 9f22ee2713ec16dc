#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run) after scripts/setup-debian.sh:
#  0. every C++ file formatted as .clang-format says (scripts/check-format.sh);
#  1. a Release build of every target with warnings as errors, and every test through ctest (the
#     layering probes among them: an include that runs back up the layers must not compile);
#  1b. the Python package: `pip install .` into a fresh venv, reusing build-test (scripts/test-python.sh);
#  2. a benchmark smoke run (tiny input, no thresholds) so benchmarks keep building and running;
#  3. `cmake --install` to a prefix, an out-of-tree policy plugin built against it alone and replayed
#     through the installed fraglab (scripts/test-install.sh);
#     then docs/cluster.md's Slurm job array and merge with the installed fraglab on a real single-node
#     Slurm (scripts/test-slurm.sh; skipped, saying why, where Slurm cannot start: not root, not installed);
#  4. the test suite again under AddressSanitizer + UndefinedBehaviorSanitizer (clang);
#  5. the threaded tests and a compare -j 4 of every policy under ThreadSanitizer (clang);
#  6. each reader's libFuzzer target for a fixed number of runs from a fixed seed (scripts/fuzz.sh),
#     built in step 4's build.
# FRAGLAB_QUICK=1 runs steps 0 and 1 only (for development).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# Each stage's header says when it began (minutes:seconds into the run): CI's limit is 30 minutes.
stage() { printf '== [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

stage "format"
./scripts/check-format.sh

stage "Release build of every target, and the test suite"
# Release (-O3, as scripts/main-job.sh builds): GCC's flow-based warnings are most numerous there, so
# -Werror here keeps the Release build of every target free of warnings.
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=Release -DFRAGLAB_WERROR=ON -DFRAGLAB_PYTHON=ON \
  -DPython_EXECUTABLE=/usr/bin/python3
cmake --build build-test -j "$jobs"
ctest --test-dir build-test --output-on-failure -j "$jobs"
[ "${FRAGLAB_QUICK:-0}" = 1 ] && exit 0

stage "the Python package: pip install . into a fresh venv (reusing build-test), module against the CLI"
./scripts/test-python.sh build-test

stage "benchmark smoke run"
FRAGLAB_BENCH_SMOKE=1 build-test/bench/fraglab_bench --benchmark_min_time=0.01 >/dev/null
python3 bench/snapshot_import.py --smoke --fraglab build-test/fraglab >/dev/null
echo "benchmarks: smoke run passed"

stage "install, the CMake package and an out-of-tree policy plugin"
prefix=$(mktemp -d)
./scripts/test-install.sh build-test "$prefix"

stage "the cluster path: Slurm job array + merge on a real single-node Slurm (skipped unless root)"
FRAGLAB="$prefix/bin/fraglab" ./scripts/test-slurm.sh
rm -rf "$prefix"

stage "test suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang, with libFuzzer's coverage)"
# One clang build serves this stage and the fuzzers (step 6): ASan + UBSan with libFuzzer's coverage
# instrumentation, at -O1 (asserts kept; the suite runs several times faster than at -O0). No -Werror:
# the Release build above holds the warnings.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DFRAGLAB_SANITIZE=ON -DFRAGLAB_FUZZ=ON \
  -DFRAGLAB_BENCH=OFF -DFRAGLAB_GUI=OFF -DFRAGLAB_CUDA=OFF -DFRAGLAB_PYTHON=OFF
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -E "tune predicts the peaks"
# (The tune acceptance test replays ~70 settings of two traces: minutes in Release, far longer under
# the sanitizers; the search code it runs is covered under the sanitizers by the other [compare] tests.)

stage "threaded tests under ThreadSanitizer"
# The code that runs threads: compare's and tune's worker pools, the GUI model's replay and snapshot
# workers (gui/model/policy_run), the recorder's lock-free buffer, the snapshot importer's second core
# (traces/in_order_worker.h: [threads], and every snapshot the CLI below reads); [compare] also runs the
# fraglab CLI, built with TSan too, with -j 2. Under TSan the test binary holds only those tests' files
# (tests/CMakeLists.txt), and no GUI or benchmarks are built. clang at -O1 compiles them in about
# two thirds of GCC's time at -O2. Not covered: the GUI app's trace loader thread (gui/app_state.cpp
# needs the GUI build).
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DFRAGLAB_TSAN=ON -DFRAGLAB_BENCH=OFF \
  -DFRAGLAB_GUI=OFF -DFRAGLAB_CUDA=OFF -DFRAGLAB_PYTHON=OFF
cmake --build build-tsan -j "$jobs" --target fraglab fraglab_tests
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
build-tsan/tests/fraglab_tests "[gui],[recorder],[fit],[threads],[compare]~\"tune predicts the peaks*\""
tsan_out=$(mktemp -d)
# Every policy side by side in 4 threads on the three smaller kinds of trace (the whole corpus takes ~5
# CPU-minutes under TSan, these ~10 s).
build-tsan/fraglab compare traces/corpus/{gpt2_train,side_stream_prefetch,seed_examples}.default.pickle.gz \
  --policies all -j 4 -o "$tsan_out" --quiet
rm -rf "$tsan_out"
unset TSAN_OPTIONS
echo "ThreadSanitizer: no data races"

stage "fuzzing each reader"
FUZZ_BUILD=build-asan FRAGLAB_CLI=build-test/fraglab ./scripts/fuzz.sh
stage "every stage passed"
