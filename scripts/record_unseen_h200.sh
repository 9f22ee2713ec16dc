#!/bin/bash
# Records the 2026-11-29 unseen workloads on the device (issue 39): `run` with `bash scripts/record_unseen_h200.sh`;
# the recordings come back tarred and split under $OUT (the device tool returns files of at most 16 MiB).
set -u
W=$OUT/rec; mkdir -p $W
run() { # workload tag conf fraction
  PYTORCH_CUDA_ALLOC_CONF="$3" FRACTION="$4" timeout 240 python3 scripts/record_unseen_h200.py "$1" $W "$2" 2>&1 | grep -v Warning | tail -2
}
run lightning_like expandable_segments-True_max_split_size_mb-128 "expandable_segments:True,max_split_size_mb:128" 0
run lightning_like default "" 0
run hf_generate max_split_size_mb-128 "max_split_size_mb:128" 0
run hf_generate expandable "expandable_segments:True" 0
run resnet_varsize expandable_gc0.6_max_split_size_mb-256 "expandable_segments:True,garbage_collection_threshold:0.6,max_split_size_mb:256" 0
run resnet_varsize roundup-dict_max_split_size_mb-200 "roundup_power2_divisions:[256:1,512:2,1024:4,>:8],max_split_size_mb:200" 0
run lightning_like expandable_segments-True_max_split_size_mb-128_cap0.02 "expandable_segments:True,max_split_size_mb:128" 0.02
run hf_generate max_split_size_mb-128_cap0.01 "max_split_size_mb:128" 0.01
ls -la $W
cd $OUT && tar cf unseen.tar -C $W . && split -b 15M unseen.tar unseen.tar.part. && rm unseen.tar && rm -rf $W
ls -la $OUT
