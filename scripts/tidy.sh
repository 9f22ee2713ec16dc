#!/usr/bin/env bash
# clang-tidy with the repository's .clang-tidy over a build's compile database; every finding is an error.
#
#   scripts/tidy.sh [BUILD_DIR [FILE_REGEX...]]     default: build-tidy (configured here), all of our sources
#   scripts/tidy.sh build allocators/ report/compare_run.cpp   only these (regexes on the source path)
#
# Not a stage of scripts/test.sh: clang-tidy parses every translation unit again, about 14 s of CPU each
# (fmt, nlohmann/json, Eigen, Catch2 headers), some 40 CPU-minutes for the whole tree. Run it on the files
# a change touches before a merge, and over the whole tree now and then.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${1:-build-tidy}
shift || true
if [ ! -f "$build/compile_commands.json" ]; then
  # The compile database only: clang-tidy needs no objects.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
fi
patterns=()
if [ $# -eq 0 ]; then
  patterns=("^$root/")  # our sources; the compile database also holds Dear ImGui's backend sources
else
  for p in "$@"; do patterns+=("^$root/$p"); done
fi
set +e
run-clang-tidy -p "$build" -quiet -j "${FRAGLAB_TIDY_JOBS:-$(nproc)}" "${patterns[@]}" 2>&1 |
  grep -v -E '^clang-tidy-[0-9]+ |^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter'
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] && echo "clang-tidy: no findings" || echo "clang-tidy: findings above" >&2
exit "$status"
