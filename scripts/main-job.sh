#!/usr/bin/env bash
# The main job: builds fraglab and replays the bundled real PyTorch traces under every
# available policy, printing the comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
for trace in traces/corpus/*.pickle.gz; do
  build/fraglab replay "$trace" --policy all --on-oom skip
  echo
done
