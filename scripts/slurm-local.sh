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
# (marker files in $DPBENCH_SLURM_DIR, default /tmp/dpbench-slurm). Daemons are found by their pid
# files, not by name, so the multi-node cluster of scripts/cluster-local.sh (its own slurmctld,
# slurmds and munged, in namespaces) may run at the same time. Exit 3 when SLURM is not
# installed (callers skip), 1 when the node does not come up. docs/clusters.md, 'A local SLURM'.
set -euo pipefail

STATE=${DPBENCH_SLURM_DIR:-/tmp/dpbench-slurm}
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
HOST=$(hostname -s)
PARTITION=${DPBENCH_SLURM_PARTITION:-dpbench}

log() { echo "slurm-local: $*" >&2; }

MUNGE_PID=/run/munge/munged.pid

# Whether the daemon of pid file $1 is running (this cluster's daemon: never one of another
# cluster's of the same name).
running() {
  local pid
  pid=$(cat "$1" 2>/dev/null || true)
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

# Stop the daemon of pid file $1 (bounded wait).
stop_pidfile() {
  local pid _
  pid=$(cat "$1" 2>/dev/null || true)
  [[ -n $pid ]] || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

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
  if running "$MUNGE_PID" && [[ -S /run/munge/munge.socket.2 ]]; then return; fi
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
  if ! running "$STATE/slurmctld.pid"; then slurmctld && touch "$STATE/started-slurmctld"; fi
  if ! running "$STATE/slurmd.pid"; then slurmd && touch "$STATE/started-slurmd"; fi
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
  if [[ -f $STATE/started-slurmd ]]; then
    stop_pidfile "$STATE/slurmd.pid"; rm -f "$STATE/started-slurmd"
  fi
  if [[ -f $STATE/started-slurmctld ]]; then
    stop_pidfile "$STATE/slurmctld.pid"; rm -f "$STATE/started-slurmctld"
  fi
  if [[ -f $STATE/started-munged ]]; then
    stop_pidfile "$MUNGE_PID"; rm -f "$STATE/started-munged"
  fi
}

status() {
  local d f
  for d in munged slurmctld slurmd; do
    f=$STATE/$d.pid; [[ $d == munged ]] && f=$MUNGE_PID
    if running "$f"; then echo "$d: running"; else echo "$d: stopped"; fi
  done
  timeout 5 sinfo 2>/dev/null || true
}

case ${1:-start} in
  start) start;;
  stop) stop;;
  status) status;;
  *) log "usage: $0 start|stop|status"; exit 2;;
esac
