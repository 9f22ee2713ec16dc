#!/usr/bin/env bash
# Installs everything fraglab needs on a fresh Debian 12 machine (Debian packages only).
# The CUDA toolkit is optional and not installed here: the CUDA device is built when
# nvcc is found (FRAGLAB_CUDA=AUTO).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
packages=(
  build-essential cmake ninja-build pkg-config git python3
  # The Python package (pyproject.toml): Debian's setuptools, wheel, pip, venv and pybind11; the *-whl
  # packages let pip build in a fresh venv without network; jsonschema checks the --json outputs.
  python3-dev python3-setuptools python3-wheel python3-pip python3-venv python3-setuptools-whl
  python3-wheel-whl python3-pip-whl pybind11-dev python3-jsonschema
  # `man fraglab` is made by help2man from --help at build time.
  help2man
  libcli11-dev nlohmann-json3-dev libfmt-dev libzstd-dev zlib1g-dev libdeflate-dev libisal-dev libeigen3-dev catch2
  libbenchmark-dev
  libglfw3-dev libimgui-dev libstb-dev libgl-dev
  xvfb xauth libgl1-mesa-dri
  clang libclang-rt-14-dev clang-format clang-tidy
  # A single-node Slurm for the cluster-path test (scripts/test-slurm.sh, docs/cluster.md).
  slurmctld slurmd slurm-client munge
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "fraglab: dependencies installed"
