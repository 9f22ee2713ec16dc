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
# Snapshots as users take them: a history that began after the model was built (the state at its
# first entry is reconstructed and replayed from), and a job that hit OOMs under a memory fraction
# (the capacity is inferred from its oom entries; each recorded OOM is tried under another setting).
build/fraglab info tests/data/snapshots/gpt2_train.default_late2.pickle.gz
build/fraglab fidelity tests/data/snapshots/gpt2_train.default_late2.pickle.gz
build/fraglab replay tests/data/snapshots/bert_varlen_oom.default_cap0.16.pickle.gz --policy pytorch:expandable_segments:True
build/fraglab diagnose tests/data/snapshots/gpt2_oom_backoff.default_cap0.12.stacks.pickle.gz --no-search
# A job that turned expandable segments off and on mid-run (vLLM's sleep mode, NeMo's dataloader): the
# snapshot records only the last setting; its device calls show the others, and the model replays them.
build/fraglab info tests/data/snapshots/varlen_transformer_train.expandable_set2-noexp_set5-exp.pickle.gz
build/fraglab fidelity tests/data/snapshots/varlen_transformer_train.expandable_set2-noexp_set5-exp.pickle.gz
# The question users ask: which PYTORCH_CUDA_ALLOC_CONF fixes the fragmentation of this job?
build/fraglab fidelity traces/corpus/bert_varlen_train.default.pickle.gz
build/fraglab tune traces/corpus/bert_varlen_train.default.pickle.gz
