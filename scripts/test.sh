#!/usr/bin/env bash
# Builds fraglab with warnings as errors and runs the whole test suite through ctest.
# This is what CI runs (.ci/run) after scripts/setup-debian.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRAGLAB_WERROR=ON
cmake --build build-test -j "$jobs"
ctest --test-dir build-test --output-on-failure -j "$jobs"
