#!/bin/bash
# Records the KV-cache servers of issue 39's plain-replay gap on the device: `run` with
# `bash scripts/record_kv_h200.sh`; the recordings come back tarred under $OUT.
set -u
W=$OUT/rec; mkdir -p $W
run() { # workload tag conf fraction
  PYTORCH_CUDA_ALLOC_CONF="$3" FRACTION="$4" timeout 150 python3 scripts/record_unseen_h200.py "$1" $W "$2" > $W/$1.$2.log 2>&1
  echo "rc=$? $1 $2"; grep -v -i "warn" $W/$1.$2.log | tail -1 | cut -c1-500
}
run kv_cat_server_wide max_split_size_mb-128_h200 "max_split_size_mb:128" 0
run kv_cat_server_wide max_split_size_mb-128_cap0.2_h200 "max_split_size_mb:128" 0.2
run kv_cat_server_wide max_split_size_mb-128_cap0.1_h200 "max_split_size_mb:128" 0.1
run kv_cat_server_wide default_cap0.1_h200 "" 0.1
run hf_generate max_split_size_mb-128_cap0.03_h200 "max_split_size_mb:128" 0.03
run kv_cat_server max_split_size_mb-128_cap0.02_h200 "max_split_size_mb:128" 0.02
ls -la $W
cd $OUT && tar cf kv.tar -C $W . && split -b 15M kv.tar kv.tar.part. && rm kv.tar && rm -rf $W
ls -la $OUT
