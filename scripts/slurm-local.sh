#!/usr/bin/env bash
# A single-node SLURM on this machine, for tests and for trying a cluster profile:
#
#   scripts/slurm-local.sh start     # munged, slurmctld, slurmd; waits until the node is idle
#   scripts/slurm-local.sh stop      # stops only the daemons this script started
#   scripts/slurm-local.sh status
#
# Needs Debian's slurm-wlm and munge (apt-get install slurm-wlm munge; the packages do not start
# any service) and root. No cgroup plugins (proctrack/linuxproc, task/none), so it also runs in
# containers. Idempotent: start leaves running daemons alone; stop kills only what start started
# (marker files in $DPBENCH_SLURM_DIR, default /tmp/dpbench-slurm). Exit 3 when SLURM is not
# installed (callers skip), 1 when the node does not come up. docs/clusters.md, 'A local SLURM'.
set -euo pipefail

STATE=${DPBENCH_SLURM_DIR:-/tmp/dpbench-slurm}
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
HOST=$(hostname -s)
PARTITION=${DPBENCH_SLURM_PARTITION:-dpbench}

log() { echo "slurm-local: $*" >&2; }

running() { pgrep -x "$1" >/dev/null 2>&1; }

write_conf() {
  local cpus mem
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
  mkdir -p "$CONF_DIR" "$STATE/spool" "$STATE/ctld" "$STATE/log"
  if [[ -f $CONF ]] && ! grep -q '^# written by dpbench scripts/slurm-local.sh' "$CONF"; then
    log "$CONF exists and was not written by this script; leaving it (and using it)"
    return
  fi
  cat > "$CONF" <<EOF
# written by dpbench scripts/slurm-local.sh: a single-node test cluster
ClusterName=dpbench
SlurmctldHost=$HOST
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerParameters=defer_batch
MessageTimeout=30
NodeName=$HOST CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
  if running munged; then return; fi
  mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
  if [[ ! -s /etc/munge/munge.key ]]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
  chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
  if id munge >/dev/null 2>&1; then
    su -s /bin/sh munge -c "munged" || munged --force
  else
    munged --force
  fi
  touch "$STATE/started-munged"
}

start() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    log "slurm-wlm and munge are not installed (apt-get install slurm-wlm munge)"
    exit 3
  fi
  mkdir -p "$STATE"
  write_conf
  start_munge
  if ! running slurmctld; then slurmctld && touch "$STATE/started-slurmctld"; fi
  if ! running slurmd; then slurmd && touch "$STATE/started-slurmd"; fi
  # Each query is bounded: a controller that is not answering (stopped by hand, stale state)
  # would otherwise make every sinfo wait out SLURM's message timeout, 60 times over.
  for _ in $(seq 1 60); do
    state=$(timeout 5 sinfo -h -N -o %T 2>/dev/null | head -1 || true)
    case $state in
      idle|mixed|allocated) log "node $HOST $state (partition $PARTITION)"; return 0;;
      down*|drain*) timeout 5 scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true;;
    esac
    sleep 0.5
  done
  log "the node did not come up; see $STATE/log"
  exit 1
}

stop() {
  if [[ -f $STATE/started-slurmd ]]; then pkill -x slurmd || true; rm -f "$STATE/started-slurmd"; fi
  if [[ -f $STATE/started-slurmctld ]]; then
    pkill -x slurmctld || true; rm -f "$STATE/started-slurmctld"
  fi
  if [[ -f $STATE/started-munged ]]; then pkill -x munged || true; rm -f "$STATE/started-munged"; fi
}

status() {
  for d in munged slurmctld slurmd; do
    if running "$d"; then echo "$d: running"; else echo "$d: stopped"; fi
  done
  timeout 5 sinfo 2>/dev/null || true
}

case ${1:-start} in
  start) start;;
  stop) stop;;
  status) status;;
  *) log "usage: $0 start|stop|status"; exit 2;;
esac
