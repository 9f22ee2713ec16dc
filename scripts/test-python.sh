#!/usr/bin/env bash
# The Python package as a user gets it: `pip install .` from the checkout into a fresh venv, with no network
# (the build requirements, setuptools and wheel, come from Debian's python3-*-whl packages), then the module
# checked against the command line the same wheel installed (tests/python/test_module.py).
# Usage: scripts/test-python.sh [BUILD_DIR]   (a CMake build directory to reuse: no second build; default
# build-python/, configured for the module and the CLI only).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-python}
python=/usr/bin/python3  # Debian's interpreter, whose setuptools, wheel and pybind11 the build uses
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp/venv"
FRAGLAB_BUILD_DIR=$build FRAGLAB_BUILD_JOBS=$(nproc) "$tmp/venv/bin/pip" install -q --no-index \
  --find-links /usr/share/python-wheels .
# The wheel holds the module, the hook and the executable; nothing of the checkout is on the path.
(cd "$tmp" && FRAGLAB_SOURCE_DIR="$OLDPWD" "$tmp/venv/bin/python" -c 'import fraglab, fraglab_hook, os, sys
assert fraglab.__file__.startswith(sys.prefix), fraglab.__file__
print("fraglab", fraglab.__version__, "from", os.path.dirname(fraglab.__file__))')
"$tmp/venv/bin/fraglab" --version
cd "$tmp" && FRAGLAB_SOURCE_DIR="$OLDPWD" "$tmp/venv/bin/python" "$OLDPWD/tests/python/test_module.py"
# `pip wheel --no-build-isolation` (the venv's own setuptools and wheel: a fresh venv has no `wheel`, so they
# come from Debian's wheels first), the wheel installed into a second fresh venv, the same checks there:
# among them fraglab.diagnose(snapshot_dict) equal to `fraglab diagnose --json` of the file.
cd "$OLDPWD"
"$tmp/venv/bin/pip" install -q --no-index --find-links /usr/share/python-wheels setuptools wheel
FRAGLAB_BUILD_DIR=$build "$tmp/venv/bin/pip" wheel -q --no-build-isolation --no-deps -w "$tmp/dist" .
"$python" -m venv "$tmp/venv2"
"$tmp/venv2/bin/pip" install -q --no-index "$tmp"/dist/fraglab-*.whl
cd "$tmp" && FRAGLAB_SOURCE_DIR="$OLDPWD" "$tmp/venv2/bin/python" "$OLDPWD/tests/python/test_module.py"
