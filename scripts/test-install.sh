#!/usr/bin/env bash
# The package and the plugin path, as a user outside this repository meets them:
#  1. `cmake --install` a build into a temporary prefix;
#  2. build examples/out_of_tree_policy against that prefix alone (find_package(fraglab));
#  3. the installed fraglab lists the plugin's policy and replays a bundled trace through it with
#     --check (every block inside device memory, none overlapping), and refuses a plugin built for
#     another API version with a clear error and exit 2;
#  4. a consumer of the package: <fraglab/...> includes against fraglab::traces, the command line as the
#     imported executable fraglab::fraglab, and the same program built with pkg-config alone.
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
# The man page and bash completion.
grep -q "fraglab 0.1.0" "$prefix/share/man/man1/fraglab.1"
grep -q "diagnose" "$prefix/share/man/man1/fraglab.1"
bash -c "source '$prefix/share/bash-completion/completions/fraglab'; COMP_WORDS=(fraglab diag); COMP_CWORD=1; _fraglab
         [ \"\${COMPREPLY[*]}\" = diagnose ]"

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
# A consumer: <fraglab/...> includes, a layer target, the imported executable; then pkg-config alone.
mkdir -p "$work/consumer"
cat >"$work/consumer/main.cpp" <<'EOF'
#include <cstdio>
#include <fraglab/traces/units.h>
int main() { std::printf("%s\n", fraglab::format_size(fraglab::parse_size("3GiB")).c_str()); }
EOF
cat >"$work/consumer/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
find_package(fraglab 0.1 REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE fraglab::traces)
add_executable(importer importer.cpp)
target_link_libraries(importer PRIVATE fraglab::import)
add_custom_target(cli_version ALL COMMAND fraglab::fraglab --version > version.txt VERBATIM)
EOF
# A library user reads a snapshot as the CLI does (import/trace_import.h: PyTorch's model passed in, no hook
# to install): settings a snapshot does not record are read from its replays, which the rules alone cannot.
cat >"$work/consumer/importer.cpp" <<'EOF'
#include <cstdio>
#include <fraglab/import/trace_import.h>
int main(int, char** argv) {
  const fraglab::Trace judged = fraglab::load_trace(argv[1]);
  const fraglab::Trace by_rules = fraglab::read_trace(argv[1]);
  std::printf("%d %d\n", judged.meta.settings_inferred ? 1 : 0, by_rules.meta.settings_inferred ? 1 : 0);
}
EOF
cmake -S "$work/consumer" -B "$work/consumer/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer/build" >/dev/null
[ "$("$work/consumer/build/consumer")" = "3.00 GiB" ]
grep -q "^fraglab 0.1.0" "$work/consumer/build/version.txt"
[ "$("$work/consumer/build/importer" \
  tests/data/snapshots/gpt2_oom_backoff.garbage_collection_threshold-0.5_max_split_size_mb-64_cap0.12_late1_nosettings.pickle.gz)" = "1 0" ]
test -f "$prefix/lib/pkgconfig/fraglab.pc"
# shellcheck disable=SC2046
c++ "$work/consumer/main.cpp" -o "$work/consumer/by-pkg-config" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs --static fraglab)
[ "$("$work/consumer/by-pkg-config")" = "3.00 GiB" ]
echo "install: package, out-of-tree plugin, version check, consumer (<fraglab/...>, fraglab::fraglab, pkg-config, fraglab::import) passed"
