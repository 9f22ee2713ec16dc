#!/usr/bin/env bash
# A real single-node Slurm on this machine, from Debian's packages (slurmctld, slurmd, slurm-client,
# munge; scripts/setup-debian.sh installs them), for testing the cluster path of docs/cluster.md.
#
#   scripts/slurm-local.sh run CMD [ARGS...]   start Slurm, run CMD with SLURM_CONF set, stop Slurm;
#                                              exits with CMD's status
#   scripts/slurm-local.sh start DIR           start Slurm with its config, state and logs in DIR
#                                              (then `export SLURM_CONF=DIR/slurm.conf`)
#   scripts/slurm-local.sh stop DIR            stop the daemons started in DIR
#   scripts/slurm-local.sh check               exit 0 if Slurm can start here, 77 (and say why) if not
#
# Everything lives in DIR: slurm.conf for this host (NodeName from `hostname -s`, CPUs from nproc,
# RealMemory from /proc/meminfo), a private munge key and socket, state, spool, pid and log files. Nothing
# under /etc is touched and no system service is used (CI containers have no systemd), so a Slurm or munge
# already configured on the machine is left alone. The daemons run as root, which slurmd needs to start
# jobs; ports are FRAGLAB_SLURM_PORT and FRAGLAB_SLURM_PORT+1 (default 16817, 16818, away from Slurm's own
# 6817/6818).
set -euo pipefail

port=${FRAGLAB_SLURM_PORT:-16817}
start_timeout=${FRAGLAB_SLURM_START_TIMEOUT:-60}

# Why Slurm cannot start here, or nothing.
why_not() {
  if [ "$(id -u)" != 0 ]; then echo "not root (slurmd must run as root to start jobs)"; return; fi
  local tool
  for tool in munged mungekey slurmctld slurmd sinfo sbatch scontrol; do
    if ! command -v "$tool" >/dev/null; then
      echo "$tool not found (scripts/setup-debian.sh installs Slurm and munge)"
      return
    fi
  done
}

write_conf() {
  local dir=$1 host cpus mem_mib
  host=$(hostname -s)
  cpus=$(nproc)
  # 90% of the memory: slurmd drains a node that reports less than RealMemory.
  mem_mib=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh for a single-node test cluster on $host.
ClusterName=fraglab-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
# No cgroups: containers (CI) rarely delegate them, and a test cluster needs no resource enforcement.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
# A merge waiting on a failed array is cancelled rather than left pending forever.
DependencyParameters=kill_invalid_depend
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
MpiDefault=none
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mib State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
  local dir=$1
  mungekey --create --keyfile="$dir/munge.key" --force
  chmod 600 "$dir/munge.key"
  munged --socket="$dir/munge.socket" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" --force
}

# Waits until sinfo shows this host idle; prints the daemons' logs if it does not come up.
wait_idle() {
  local dir=$1 host state=""
  host=$(hostname -s)
  for _ in $(seq "$start_timeout"); do
    state=$(SLURM_CONF="$dir/slurm.conf" sinfo --noheader --nodes="$host" --format=%T 2>/dev/null || true)
    if [ "$state" = idle ]; then return 0; fi
    sleep 1
  done
  echo "slurm-local: node $host not idle after ${start_timeout}s (state: '${state:-no answer}')" >&2
  tail -n 20 "$dir"/*.log >&2 || true
  return 1
}

start() {
  local dir=$1 reason
  reason=$(why_not)
  if [ -n "$reason" ]; then echo "slurm-local: cannot start Slurm: $reason" >&2; return 1; fi
  mkdir -p "$dir/state" "$dir/spool"
  chmod 700 "$dir"
  write_conf "$dir"
  start_munge "$dir"
  slurmctld -f "$dir/slurm.conf"
  slurmd -f "$dir/slurm.conf"
  wait_idle "$dir"
  echo "slurm-local: node $(hostname -s) idle ($(nproc) CPUs), SLURM_CONF=$dir/slurm.conf"
}

# Stops each daemon by the pid it wrote, slurmd and slurmctld first, and waits until they are gone.
stop() {
  local dir=$1 name pid
  for name in slurmd slurmctld munged; do
    [ -f "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 30); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -9 "$pid" 2>/dev/null || true
  done
}

case "${1:-}" in
  check)
    reason=$(why_not)
    if [ -n "$reason" ]; then echo "slurm-local: Slurm cannot start here: $reason"; exit 77; fi ;;
  start) start "${2:?usage: slurm-local.sh start DIR}" ;;
  stop) stop "${2:?usage: slurm-local.sh stop DIR}" ;;
  run)
    shift
    [ $# -gt 0 ] || { echo "usage: slurm-local.sh run CMD [ARGS...]" >&2; exit 2; }
    dir=$(mktemp -d /tmp/fraglab-slurm.XXXXXX)
    trap 'stop "$dir"; rm -rf "$dir"' EXIT
    start "$dir"
    status=0
    SLURM_CONF="$dir/slurm.conf" "$@" || status=$?
    exit "$status" ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2 ;;
esac
