#!/usr/bin/env bash
# Fails when a C++ file differs from .clang-format (clang-format from Debian 12: clang-format 14).
#   scripts/check-format.sh         list the files that differ, exit 1 if any
#   scripts/check-format.sh --fix   rewrite them in place
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format not installed (scripts/setup-debian.sh)"; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check-format: not formatted (scripts/check-format.sh --fix):\n'; printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
