#!/usr/bin/env bash
# Every snapshot under the given folders (default tests/data/snapshots), two ways: `fidelity` (the
# model against the recorded device calls, with the recorded addresses) and plain `replay --policy
# pytorch` (by default on the recording's addresses where it asks for the recorded segments) against the
# peak fidelity reads from the recording. The same replay on the CUDA address model (`--addresses cuda`,
# what other settings and policies get) is reported beside it, and its misses counted, but not failed.
# Prints one line a snapshot and a count; exits 1 when any is not exact or misses the peak.
#   scripts/check_snapshots.sh [FRAGLAB] [DIR...]
set -uo pipefail
fraglab=${1:-build/fraglab}
shift || true
dirs=("$@")
[ ${#dirs[@]} -eq 0 ] && dirs=(tests/data/snapshots)
total=0 bad=0 cuda_misses=0
while IFS= read -r f; do
  total=$((total + 1))
  verdict=$("$fraglab" fidelity "$f" 2>/dev/null | grep -v '^note' | head -1)
  recorded=$(grep -o 'recorded [0-9]*' <<<"$verdict" | head -1 | tr -dc 0-9)
  replayed=$("$fraglab" replay "$f" --policy pytorch --no-oracle-bound 2>/dev/null |
    grep '^peak reserved' | grep -o '([0-9]* bytes)' | tr -dc 0-9)
  cuda=$("$fraglab" replay "$f" --policy pytorch --no-oracle-bound --addresses cuda 2>/dev/null |
    grep '^peak reserved' | grep -o '([0-9]* bytes)' | tr -dc 0-9)
  [ -n "$recorded" ] && [ "$cuda" != "$recorded" ] && cuda_misses=$((cuda_misses + 1))
  status=ok
  if [[ $verdict != exact* ]] || [ -z "$recorded" ] || [ "$recorded" != "$replayed" ]; then
    status=MISS
    bad=$((bad + 1))
  fi
  printf '%s %s fidelity=%s recorded_peak=%s replay_peak=%s cuda_model_peak=%s\n' "$status" "${f#./}" "${verdict%%:*}" \
    "$recorded" "$replayed" "$cuda"
done < <(find "${dirs[@]}" -name '*.pickle.gz' -o -name '*.pickle' -o -name '*.pkl' -o -name '*.pkl.gz' | sort)
echo "$((total - bad)) of $total snapshots exact under fidelity and at the recorded peak in plain replay" \
  "($cuda_misses miss it on the CUDA address model)"
[ "$bad" -eq 0 ]
