#!/usr/bin/env bash
# The main job: builds fraglab and replays the bundled real PyTorch traces under every
# available policy, printing the comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFRAGLAB_TESTS=OFF -DFRAGLAB_BENCH=OFF
cmake --build build -j "$(nproc)" --target fraglab
for trace in traces/corpus/*.pickle.gz; do
  [[ "$trace" == *.stacks.* ]] && continue  # same events as gpt2_train.default, plus stack frames
  build/fraglab replay "$trace" --policy all --on-oom skip
  echo
done
# The question users ask: which PYTORCH_CUDA_ALLOC_CONF fixes the fragmentation of this job?
build/fraglab fidelity traces/corpus/bert_varlen_train.default.pickle.gz
build/fraglab tune traces/corpus/bert_varlen_train.default.pickle.gz
