#!/usr/bin/env bash
# Proves that two fraglab binaries make the same decisions: what every speed change and every
# behaviour-preserving move must show before it lands (docs/performance.md, issue 18's rule 7).
#   scripts/check_same_decisions.sh OLD_FRAGLAB NEW_FRAGLAB [EXTRA_TRACE ...]
# Compares, byte for byte:
#   - `compare traces/corpus --policies all`: results.csv and results.json;
#   - `fidelity` of every snapshot in tests/data/snapshots and traces/corpus (stdout and exit status);
#   - `replay --json` of each EXTRA_TRACE (e.g. a generated random trace) with every policy named in
#     $POLICIES (space-separated, default all), replay times (the one field not reproducible) left out.
# The JSON documents are compared in the JSON contract's shape (docs/json.md): a binary from before it
# (replay's object for one policy, singular device-call keys, peaks as objects) is rewritten into it by
# scripts/json_contract.py, which prints both sides canonically (keys sorted); same values, same decisions.
# Prints one line per check and exits 1 on the first difference, leaving both outputs in $WORK.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 OLD_FRAGLAB NEW_FRAGLAB [EXTRA_TRACE ...]" >&2
  exit 2
fi
old=$(realpath "$1") new=$(realpath "$2")
shift 2
cd "$(dirname "$0")/.."
work=${WORK:-$(mktemp -d)}
mkdir -p "$work/old" "$work/new"
fail() {
  echo "DIFFERENT: $1 (outputs in $work)"
  exit 1
}

for side in old new; do
  bin=$old
  [ "$side" = new ] && bin=$new
  "$bin" compare traces/corpus --policies all -j "$(nproc)" --quiet \
    --csv "$work/$side/results.csv" --json "$work/$side/results.json"
done
cmp -s "$work/old/results.csv" "$work/new/results.csv" || fail "compare results.csv"
for side in old new; do scripts/json_contract.py "$work/$side/results.json" >"$work/$side/results.canonical.json"; done
cmp -s "$work/old/results.canonical.json" "$work/new/results.canonical.json" || fail "compare results.json"
echo "same: compare traces/corpus --policies all (results.csv, results.json)"

n=0
for f in tests/data/snapshots/*.pickle* traces/corpus/*.pickle*; do
  for side in old new; do
    bin=$old
    [ "$side" = new ] && bin=$new
    rc=0
    "$bin" fidelity "$f" >"$work/$side/fidelity.txt" 2>&1 || rc=$?
    echo "exit $rc" >>"$work/$side/fidelity.txt"
  done
  cmp -s "$work/old/fidelity.txt" "$work/new/fidelity.txt" || fail "fidelity $f"
  n=$((n + 1))
done
echo "same: fidelity of $n snapshots"

policy_args=()
for p in ${POLICIES:-all}; do policy_args+=(--policy "$p"); done
for t in "$@"; do
  for side in old new; do
    bin=$old
    [ "$side" = new ] && bin=$new
    "$bin" replay "$t" "${policy_args[@]}" --json >"$work/$side/replay.raw.json"
    scripts/json_contract.py "$work/$side/replay.raw.json" >"$work/$side/replay.json"
  done
  cmp -s "$work/old/replay.json" "$work/new/replay.json" || fail "replay --policy ${POLICIES:-all} --json $t"
  echo "same: replay $t --policy ${POLICIES:-all} --json (replay_seconds left out)"
done
echo "decisions identical"
