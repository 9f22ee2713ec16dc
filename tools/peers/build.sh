#!/usr/bin/env bash
# Builds the C++ peer runners with nvcc into BUILD_DIR (default .device-carry/peers/bin):
#   rmm_reference   RMM v25.10.00's resources (sources from tools/peers/fetch_sources.sh), its
#                   small compiled part (cpp/src: errors, logger, device and stream helpers) and
#                   rapids-logger compiled in; CCCL and NVTX3 from the CUDA toolkit.
#   async_reference cudaMallocAsync on a fresh cudaMemPool_t (the CUDA runtime only).
#   async_probe     fixed patterns through cudaMallocAsync: how the pool grows, which hole it reuses.
# No patch to RMM is needed: the only generated file is rmm/logger_macros.hpp, which RMM's
# CMake makes from rapids-logger's template (fetch_sources.sh does the same with sed).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
src=$root/.device-carry/peers/src
out=${1:-$root/.device-carry/peers/bin}
mkdir -p "$out"
[ -f "$src/COMMITS" ] || { echo "no RMM sources: run tools/peers/fetch_sources.sh first" >&2; exit 2; }
arch=${CUDA_ARCH:-native}
cuda_inc=$(dirname "$(command -v nvcc)")/../include
# CUDA 13 keeps CCCL under include/cccl (thrust, cub, cuda/std); nvcc finds it, -I makes it explicit.
common=(-std=c++17 -O2 -arch="$arch" --expt-relaxed-constexpr --expt-extended-lambda
        -I"$cuda_inc/cccl" -I"$src/rmm/cpp/include" -I"$src/rapids-logger/include" -I"$src/spdlog/include"
        -DLIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE -DRMM_REFERENCE_VERSION="\"$(grep '^rmm ' "$src/COMMITS" | cut -c5-12) v25.10.00\"" -w)
rmm_src=(aligned cuda_device cuda_stream cuda_stream_view error logger)
objs=()
for f in "${rmm_src[@]}"; do  # independent translation units: compiled side by side
  nvcc "${common[@]}" -x cu -c "$src/rmm/cpp/src/$f.cpp" -o "$out/rmm_$f.o" &
  objs+=("$out/rmm_$f.o")
done
nvcc "${common[@]}" -x cu -c "$src/rapids-logger/src/logger.cpp" -o "$out/rapids_logger.o" &
nvcc -std=c++17 -O2 -arch="$arch" "$root/tools/peers/async_reference.cu" -o "$out/async_reference" &
nvcc -std=c++17 -O2 -arch="$arch" "$root/tools/peers/async_probe.cu" -o "$out/async_probe" &
for job in $(jobs -p); do wait "$job"; done
nvcc "${common[@]}" "$root/tools/peers/rmm_reference.cu" "${objs[@]}" "$out/rapids_logger.o" -o "$out/rmm_reference"
echo "built $out/rmm_reference $out/async_reference"
