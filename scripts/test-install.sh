#!/usr/bin/env bash
# The package and the plugin path, as a user outside this repository meets them:
#  1. `cmake --install` a build into a temporary prefix;
#  2. build examples/out_of_tree_policy against that prefix alone (find_package(fraglab));
#  3. the installed fraglab lists the plugin's policy and replays a bundled trace through it with
#     --check (every block inside device memory, none overlapping), and refuses a plugin built for
#     another API version with a clear error and exit 2.
# Usage: scripts/test-install.sh BUILD_DIR PREFIX   (PREFIX is left installed, for later stages)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?BUILD_DIR}
prefix=${2:?PREFIX}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/fraglab"
test -f "$prefix/include/fraglab/allocators/plugin.h"
test -f "$prefix/lib/cmake/fraglab/fraglabConfigVersion.cmake"

# Only the prefix: no source tree include paths, no build tree.
cmake -S examples/out_of_tree_policy -B "$work/example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/example" >/dev/null
plugin="$work/example/libsize_class_cache.so"

fraglab="$prefix/bin/fraglab"
"$fraglab" policies --plugin "$plugin" | grep -q "^size_class_cache"
"$fraglab" replay traces/corpus/gpt2_train.default.pickle.gz --plugin "$plugin" --policy size_class_cache \
  --policy size_class_cache:divisions=8 --check >"$work/replay.txt"
grep -q "size_class_cache" "$work/replay.txt"

# A plugin built for another API version is refused, not run.
sed 's/FRAGLAB_PLUGIN_API_VERSION, FRAGLAB_PLUGIN_ABI_TAG/FRAGLAB_PLUGIN_API_VERSION + 1, FRAGLAB_PLUGIN_ABI_TAG/' \
  "$prefix/include/fraglab/allocators/plugin.h" >"$work/plugin_v2.h"
mkdir -p "$work/v2/fraglab/allocators" && cp "$work/plugin_v2.h" "$work/v2/fraglab/allocators/plugin.h"
c++ -std=c++20 -shared -fPIC -I"$work/v2/fraglab" -I"$work/v2" -I"$prefix/include/fraglab" \
  examples/out_of_tree_policy/size_class_cache.cpp -o "$work/v2/libv2.so"
set +e
"$fraglab" policies --plugin "$work/v2/libv2.so" >/dev/null 2>"$work/v2.err"
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "plugin API version 2" "$work/v2.err" || { cat "$work/v2.err"; exit 1; }
echo "install: package, out-of-tree plugin and version check passed"
