#!/usr/bin/env bash
# Records, on one host with two GPUs, the per-rank snapshots of tests/data/snapshots/ranks_h200/ and checks
# `fraglab ranks`' one setting for every rank against real runs (docs/gpu-results/ranks_rerun.md):
#   1. DDP, FSDP2 (fully_shard) and a pipeline-parallel job (pp_train), two ranks each, under the default
#      settings and expandable segments;
#   2. DDP with uneven data (ddp_uneven_oom) under memory fractions FRACS, default and expandable: rank 1 runs out;
#   3. for each of those that ran out: `fraglab ranks --json --capacity C` (C: the fraction's bytes), then the
#      job again through the step that ran out (STEPS), under the one setting it predicts for every rank, the
#      outcome written to OUTDIR/rerun_summary.json.
# Jobs run side by side (each its own torchrun on a free port; a memory fraction caps each process alone).
#   RERUNS="FRACTION@CONF ...": only ddp_uneven_oom's 8 steps under each (the check of predictions made here).
# Usage: scripts/record_ranks_job.sh OUTDIR FRAGLAB
set -uo pipefail
out=${1:?OUTDIR}
fl=${2:?FRAGLAB}
here=$(dirname "$0")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$out" "$out/rerun"
E=PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
FRACS=${FRACS:-0.021 0.022 0.023 0.024 0.025 0.026 0.028 0.03}
job() {  # job DIR LOG WORKLOAD ENV...
  local dir=$1 log=$2 w=$3
  shift 3
  env "$@" timeout "${JOB_TIMEOUT:-200}" python3 -m torch.distributed.run --standalone --nproc_per_node 2 \
    "$here/record_torch_traces.py" "$w" "$dir" >"$dir/$log.log" 2>&1 || echo "FAILED: $log ($*)"
}
if [ -n "${RERUNS:-}" ]; then  # RERUNS="FRACTION@CONF ...": ddp_uneven_oom's whole run (8 steps) under each, side by side
  for r in $RERUNS; do
    f=${r%%@*} conf=${r#*@}
    d="$out/rerun8/${f}_$(echo "${conf:-default}" | tr ':,' '-_')"
    mkdir -p "$d"
    job "$d" rerun ddp_uneven_oom FRACTION=$f STACKS=1 "PYTORCH_CUDA_ALLOC_CONF=$conf" &
  done
  wait
  exit 0
fi
for w in ddp_train fsdp_train pp_train; do
  job "$out" "$w.default" $w X=1 &
  job "$out" "$w.expandable" $w "$E" &
done
for f in $FRACS; do
  job "$out" "ddp_uneven_oom.default_$f" ddp_uneven_oom FRACTION=$f STACKS=1 &
  job "$out" "ddp_uneven_oom.expandable_$f" ddp_uneven_oom FRACTION=$f STACKS=1 "$E" &
done
wait
echo "== recorded: $(ls "$out"/*.pickle.gz | wc -l) snapshots"

# The predictions, then the reruns (side by side).
python3 - "$out" "$fl" >"$out/predictions.txt" <<'EOF'
import glob, json, os, subprocess, sys
out, fl = sys.argv[1], sys.argv[2]
rows = []
for j0 in sorted(glob.glob(f"{out}/ddp_uneven_oom.*_rank0_cap*.json")):
    j1 = j0.replace("_rank0_", "_rank1_")
    if not os.path.exists(j1):
        continue
    info = [json.load(open(j0)), json.load(open(j1))]
    ooms = [i["trace_ooms"] for i in info]
    if not any(ooms) and not any(i.get("oom_uncaught") for i in info):
        rows.append({"job": os.path.basename(j0), "ooms": ooms, "ran_out": False})
        continue
    cap = info[0]["capacity_bytes"]
    steps = [i.get("oom_step") if i.get("oom_step") is not None else i.get("steps_done") for i in info]
    step = min(s for s in steps if s is not None)
    files = [j0[:-5] + ".pickle.gz", j1[:-5] + ".pickle.gz"]
    r = subprocess.run([fl, "ranks", "--json", "--capacity", str(cap), *files], capture_output=True, text=True)
    if r.returncode:
        rows.append({"job": os.path.basename(j0), "error": r.stderr[-2000:]})
        continue
    rep = json.loads(r.stdout)["jobs"][0]
    rows.append({"job": os.path.basename(j0), "ran_out": True, "fraction": info[0]["memory_fraction"],
                 "capacity": cap, "recorded_conf": info[0]["conf"], "ooms": ooms, "steps": step + 1,
                 "oom_uncaught": [i.get("oom_uncaught") for i in info],
                 "oom_where": [i.get("oom_where") for i in info],
                 "limit_rank": rep["limit_rank"], "limit_reason": rep["limit_reason"],
                 "fidelity": [k["fidelity_exact"] for k in rep["ranks"]],
                 "predicted": rep["fits_all"]})
json.dump(rows, open(f"{out}/predictions.json", "w"), indent=1)
for row in rows:
    if row.get("ran_out") and "predicted" in row:
        print(row["fraction"], row["steps"], row["predicted"]["conf"] or "-", row["recorded_conf"])
EOF
cat "$out/predictions.txt"
while read -r f steps conf recorded; do
  [ "$conf" = - ] && conf=
  d="$out/rerun/$([ "$recorded" = default ] && echo default || echo expandable)_$f"
  mkdir -p "$d"
  job "$d" rerun ddp_uneven_oom FRACTION=$f STACKS=1 STEPS=$steps "PYTORCH_CUDA_ALLOC_CONF=$conf" &
done <"$out/predictions.txt"
wait
python3 - "$out" <<'EOF'
import glob, json, sys
out = sys.argv[1]
runs = {}
for j in sorted(glob.glob(f"{out}/rerun/*/*.json")):
    i = json.load(open(j))
    runs[j.split("/rerun/")[1]] = {"conf": i["conf"], "fraction": i["memory_fraction"], "rank": i.get("rank"),
                       "trace_ooms": i["trace_ooms"], "oom_step": i.get("oom_step"),
                       "oom_uncaught": i.get("oom_uncaught"), "stopped_by_rank": i.get("stopped_by_rank"),
                       "peak_reserved": i["stats"]["reserved_bytes.all.peak"]}
json.dump({"predictions": json.load(open(f"{out}/predictions.json")), "reruns": runs},
          open(f"{out}/rerun_summary.json", "w"), indent=1)
print(json.dumps(runs, indent=1))
EOF
