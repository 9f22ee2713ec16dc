#!/bin/bash
# Records real PyTorch Lightning runs on the device (issue 39): `run` with `bash scripts/record_lightning_h200.sh`,
# carrying .devlight/ (Lightning 2.6, lightning_utilities and torchmetrics from their public sources: the
# device has PyTorch and transformers but no package index). The recordings come back tarred and split
# under $OUT (the device tool returns files of at most 16 MiB). .devlight/ (git-ignored) was made from the
# public repositories' snapshots (Lightning-AI/pytorch-lightning 7f0c3436cd, version 2.6.2;
# Lightning-AI/utilities c89c402; Lightning-AI/torchmetrics dab033394), pure Python:
#   git -C pytorch-lightning archive HEAD src/lightning src/version.info | tar -x -C .devlight
#   git -C utilities archive HEAD src/lightning_utilities | tar -x -C .devlight
#   git -C torchmetrics archive HEAD src/torchmetrics | tar -x -C .devlight
set -u
export PYTHONPATH=$PWD/.devlight/src${PYTHONPATH:+:$PYTHONPATH}
W=$OUT/rec; mkdir -p $W
run() { # tag conf fraction
  PYTORCH_CUDA_ALLOC_CONF="$2" FRACTION="$3" timeout 200 python3 scripts/record_lightning_h200.py $W "$1" > $W/$1.log 2>&1
  echo "rc=$? $1"; grep -v -i "warn" $W/$1.log | tail -3 | cut -c1-600
}
run expandable_segments-True_max_split_size_mb-128_h200 "expandable_segments:True,max_split_size_mb:128" 0
run default_h200 "" 0
run expandable_segments-True_garbage_collection_threshold-0.6_max_split_size_mb-128_cap0.1_h200 "expandable_segments:True,garbage_collection_threshold:0.6,max_split_size_mb:128" 0.1
run expandable_segments-True_max_split_size_mb-128_cap0.08_h200 "expandable_segments:True,max_split_size_mb:128" 0.08
run expandable_segments-True_max_split_size_mb-64_roundup_power2_divisions-4_h200 "expandable_segments:True,max_split_size_mb:64,roundup_power2_divisions:4" 0
run max_split_size_mb-128_h200 "max_split_size_mb:128" 0
ls -la $W
cd $OUT && tar cf lightning.tar -C $W . && split -b 15M lightning.tar lightning.tar.part. && rm lightning.tar && rm -rf $W
ls -la $OUT
