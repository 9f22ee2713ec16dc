#!/usr/bin/env bash
# Copies the peer allocators' sources, each at one pinned commit, from git clones into
# .device-carry/peers/src (git-ignored; the device has no network, so they travel with `carry`).
#
#   tools/peers/fetch_sources.sh RMM_GIT RAPIDS_LOGGER_GIT SPDLOG_GIT
#
# Each argument is a git directory (a clone or a bare mirror) of rapidsai/rmm,
# rapidsai/rapids-logger and gabime/spdlog. What is taken, and why these commits:
#  - RMM v25.10.00 (tag, commit 7aaad1de): the first RAPIDS release built for CUDA 13, and
#    the last whose pool/arena/binning resources are all header-only and that builds with the
#    CCCL 3.0 that CUDA 13.0 ships (rapids-cmake v25.10.00 pins CCCL 3.0.3; cccl_adaptors.hpp
#    handles CCCL 3.0 and 3.1). cpp/include plus the few cpp/src files the resources link to.
#  - rapids-logger 46070bb2 (v0.1.0 + 26, the commit rapids-cmake v25.10.00 pins as
#    rapids_logger 0.1.0): RMM's logger. include/, src/logger.cpp and the logger_macros.hpp
#    template RMM's CMake instantiates (rapids-logger's create_logger_macros).
#  - spdlog v1.13.0 (7c02e204, header-only with its bundled fmt): rapids-logger's backend.
#    rapids-cmake v25.10.00 pins spdlog 1.14.1; the reference store has spdlog up to 1.13.0.
#    The logger writes only RMM's debug log, never anything the allocators decide.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 RMM_GIT RAPIDS_LOGGER_GIT SPDLOG_GIT" >&2; exit 2; }
RMM_COMMIT=7aaad1dee0690a48db8c92210593f6c70f6f7648          # v25.10.00
LOGGER_COMMIT=46070bb255482f0782ca840ae45de9354380e298       # rapids-logger 0.1.0 as pinned
SPDLOG_COMMIT=7c02e204c92545f869e2f04edaab1f19fe8b19fd       # spdlog v1.13.0
root=$(git rev-parse --show-toplevel)
dest=$root/.device-carry/peers/src
rm -rf "$dest" && mkdir -p "$dest"/{rmm,rapids-logger,spdlog}
git -C "$1" archive "$RMM_COMMIT" cpp/include cpp/src | tar -x -C "$dest/rmm"
git -C "$2" archive "$LOGGER_COMMIT" include src cmake/logger_macros.hpp.in | tar -x -C "$dest/rapids-logger"
git -C "$3" archive "$SPDLOG_COMMIT" include | tar -x -C "$dest/spdlog"
# RMM's CMake: create_logger_macros(RMM "rmm::default_logger()" include/rmm)
sed -e 's/@_RAPIDS_LOGGER_MACRO_PREFIX@/RMM/g' -e 's/@_RAPIDS_LOGGER_DEFAULT_LOGGER@/rmm::default_logger()/g' \
  "$dest/rapids-logger/cmake/logger_macros.hpp.in" > "$dest/rmm/cpp/include/rmm/logger_macros.hpp"
printf 'rmm %s\nrapids-logger %s\nspdlog %s\n' "$RMM_COMMIT" "$LOGGER_COMMIT" "$SPDLOG_COMMIT" > "$dest/COMMITS"
du -sh "$dest"
