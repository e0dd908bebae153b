#!/usr/bin/env bash
# A single-node SLURM on this machine, from Debian's slurm-wlm and munge, for tests and trials.
#   scripts/slurm_local.sh start    # munged + slurmctld + slurmd; waits until the node is idle
#   scripts/slurm_local.sh status   # exit 0 iff the cluster answers and the node can run jobs
#   scripts/slurm_local.sh stop     # stops the daemons this script started (by pid file)
# State lives in $SLURM_LOCAL_DIR (default /tmp/mmsum-slurm). Needs root (slurmd runs jobs as the
# submitting user). Install: apt-get install -y slurm-wlm munge
set -euo pipefail

DIR="${SLURM_LOCAL_DIR:-/tmp/mmsum-slurm}"
CONF_DIR=/etc/slurm            # where sbatch/srun/scontrol look for slurm.conf
HOST="$(hostname -s)"
CPUS="$(nproc)"
MEM_MB="$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)"

need() { command -v "$1" >/dev/null || { echo "slurm_local: $1 not found (apt-get install -y slurm-wlm munge)" >&2; exit 2; }; }

write_conf() {
  mkdir -p "$DIR"/{state,spool,log,munge} "$CONF_DIR"
  cat > "$CONF_DIR/slurm.conf" <<CONF
# Written by scripts/slurm_local.sh: one node, no cgroups (containers), no accounting daemon.
ClusterName=mmsum-local
SlurmctldHost=$HOST
SlurmUser=root
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
JobRequeue=1
# Quick turnaround for tests: a requeued/killed job's processes get little grace.
KillWait=5
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
}

start_munge() {
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  fi
  chown root:root /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge; chmod 755 /run/munge
  if ! munge -n >/dev/null 2>&1; then
    munged --force --key-file=/etc/munge/munge.key --pid-file="$DIR/munged.pid" \
      --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/seed" --socket=/run/munge/munge.socket.2
  fi
  for _ in $(seq 20); do munge -n >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "slurm_local: munged did not come up (see $DIR/log/munged.log)" >&2; exit 1
}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

node_ready() { sinfo -h -n "$HOST" -o %t 2>/dev/null | grep -Eq '^(idle|mix|alloc)'; }

start() {
  need slurmctld; need slurmd; need munged
  write_conf
  start_munge
  alive "$DIR/slurmctld.pid" || slurmctld -i
  alive "$DIR/slurmd.pid" || slurmd
  for _ in $(seq 60); do
    if node_ready; then echo "slurm_local: up (node $HOST, $CPUS CPUs, partition local)"; return 0; fi
    scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
    sleep 1
  done
  echo "slurm_local: node $HOST did not become idle; logs in $DIR/log" >&2; sinfo >&2 || true; exit 1
}

stop() {
  for name in slurmd slurmctld munged; do
    if alive "$DIR/$name.pid"; then
      pid="$(cat "$DIR/$name.pid")"; kill "$pid"
      for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    fi
    rm -f "$DIR/$name.pid"
  done
  echo "slurm_local: stopped"
}

status() {
  if node_ready; then sinfo; exit 0; fi
  echo "slurm_local: not running" >&2; exit 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
