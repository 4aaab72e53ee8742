#!/usr/bin/env bash
# A multi-node SLURM on this machine: K node namespaces and a login namespace, each with its own
# network namespace (an address on a bridge, 192.0.2.0/24), hostname (UTS namespace) and private
# /tmp (mount namespace), one slurmd per node and slurmctld on the login node:
#
#   scripts/cluster-local.sh start [--nodes K]   # default 3 nodes; waits until every node is idle
#   scripts/cluster-local.sh exec login CMD...   # run CMD on a node (login, node1, ...), cwd kept
#   scripts/cluster-local.sh stop                # removes everything start created
#   scripts/cluster-local.sh status
#
# Names: bridge dpbr0 (in the root namespace, which gets no address), network namespaces
# dpb-login and dpb-node1..K (192.0.2.1 and 192.0.2.11..), the interface inside each is dpb0,
# hostnames login and node1..K, partition `multi`. A holder process (`sleep infinity`) keeps each
# node's UTS and mount namespaces; every daemon of the node is started inside them with nsenter,
# so the jobs slurmd launches (dask workers) live on that node: its address, hostname and /tmp.
# Inside the namespaces /etc/slurm and /etc/hosts are bind mounts of this cluster's own files,
# and munged has its own socket: the root namespace's /etc/slurm/slurm.conf (scripts/slurm-local.sh)
# is never written, so the single-node cluster of slurm-local.sh may run at the same time.
# /run and the project directory are shared by every node (the shared file system).
#
# Needs root, Debian's slurm-wlm and munge, iproute2 and util-linux (unshare, nsenter). Idempotent:
# start leaves a running cluster alone. Stop kills only the processes start started (pid files in
# $DPBENCH_CLUSTER_DIR, default /run/dpbench-cluster: a directory every namespace sees, unlike
# the nodes' private /tmp) and deletes the namespaces, veths and bridge. Exit 3 when a tool is
# missing (callers skip), 1 when the nodes do not come up. docs/clusters.md, 'Multi-node'.
set -euo pipefail

STATE=${DPBENCH_CLUSTER_DIR:-/run/dpbench-cluster}
# The prefix of the names in the root namespace (bridge, namespaces, veths): a second cluster
# with another prefix and state directory can run beside the first (tests/integration/
# test_multinode.py starts and stops one to check that stop leaves nothing behind).
PREFIX=${DPBENCH_CLUSTER_PREFIX:-dpb}
if ! [[ $PREFIX =~ ^[a-z]{2,4}$ ]]; then
  echo "cluster-local: DPBENCH_CLUSTER_PREFIX=$PREFIX: allowed: 2 to 4 lowercase letters" >&2
  exit 2
fi
BRIDGE=${PREFIX}br0
IFACE=dpb0
NET=192.0.2
PARTITION=multi
MUNGE_SOCKET=$STATE/munge/munge.socket
CONF=$STATE/etc/slurm/slurm.conf

log() { echo "cluster-local: $*" >&2; }

# The node names of the cluster in $STATE (or of --nodes K before it exists).
nodes() { cat "$STATE/nodes" 2>/dev/null || true; }
addr_of() {
  case $1 in
    login) echo "$NET.1";;
    node*) echo "$NET.$((10 + ${1#node}))";;
  esac
}
holder_pid() { cat "$STATE/pids/$1.holder" 2>/dev/null || true; }
alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }

# Run a command inside a node's namespaces (network, UTS, mount) with the caller's cwd; with
# IN_NODE_EXEC=1 this shell is replaced by it (its pid is the command's: callers can signal it).
in_node() {
  local name=$1; shift
  local pid; pid=$(holder_pid "$name")
  if ! alive "$pid"; then log "node $name is not running (nodes: login $(nodes | paste -sd' '))"; return 1; fi
  local cmd=(nsenter -t "$pid" -n -u -m -- sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"'
             sh "$PWD" "$@")
  if [[ ${IN_NODE_EXEC:-0} == 1 ]]; then exec "${cmd[@]}"; fi
  "${cmd[@]}"
}

need_tools() {
  local t missing=()
  for t in slurmctld slurmd munged ip unshare nsenter sinfo; do
    command -v "$t" >/dev/null 2>&1 || missing+=("$t")
  done
  if (( ${#missing[@]} )); then
    log "missing: ${missing[*]} (apt-get install slurm-wlm munge iproute2 util-linux)"
    exit 3
  fi
  if [[ $(id -u) != 0 ]]; then log "needs root (namespaces, daemons)"; exit 3; fi
  if ! unshare --net --uts --mount true 2>/dev/null; then
    log "this kernel (or container) does not allow network, UTS and mount namespaces"; exit 3
  fi
}

write_files() {
  local k=$1 n cpus mem
  mkdir -p "$STATE"/{pids,log,ctld,spool,munge,etc/slurm}
  # One CPU per node: the scheduler spreads single-core worker jobs over the nodes.
  cpus=1
  mem=$(awk -v k="$k" '/MemTotal/ {print int($2 / 1024 * 0.8 / k)}' /proc/meminfo)
  : > "$STATE/nodes"
  for n in $(seq 1 "$k"); do echo "node$n" >> "$STATE/nodes"; done
  {
    echo "127.0.0.1 localhost"
    echo "$(addr_of login) login"
    for n in $(nodes); do echo "$(addr_of "$n") $n"; done
  } > "$STATE/etc/hosts"
  {
    cat <<EOF
# written by dpbench scripts/cluster-local.sh: a multi-node test cluster (namespaces)
ClusterName=dpbmulti
SlurmctldHost=login($(addr_of login))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
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
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/pids/slurmctld.pid
SlurmdPidFile=$STATE/pids/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerParameters=defer_batch
MessageTimeout=30
SlurmdTimeout=30
EOF
    for n in $(nodes); do
      echo "NodeName=$n NodeAddr=$(addr_of "$n") CPUs=$cpus RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=$PARTITION Nodes=$(nodes | paste -sd,) Default=YES MaxTime=INFINITE State=UP"
  } > "$CONF"
  for n in $(nodes); do mkdir -p "$STATE/spool/$n"; done
}

make_network() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    touch "$STATE/created-bridge"
  fi
  ip link set "$BRIDGE" up
  local n
  for n in login $(nodes); do
    if ! ip netns list | grep -qw "$PREFIX-$n"; then ip netns add "$PREFIX-$n"; fi
    if ! ip link show "${PREFIX}v-$n" >/dev/null 2>&1; then
      ip link add "${PREFIX}v-$n" type veth peer name "$IFACE" netns "$PREFIX-$n"
      ip -n "$PREFIX-$n" addr add "$(addr_of "$n")/24" dev "$IFACE"
    fi
    ip link set "${PREFIX}v-$n" master "$BRIDGE" up
    ip -n "$PREFIX-$n" link set lo up
    ip -n "$PREFIX-$n" link set "$IFACE" up
  done
}

# The process holding node $1's UTS and mount namespaces: its hostname, a private /tmp, this
# cluster's /etc/hosts and /etc/slurm.
start_holder() {
  local n=$1
  alive "$(holder_pid "$n")" && return 0
  rm -f "$STATE/pids/$n.holder"
  # shellcheck disable=SC2016
  # nsenter, not ip netns exec: that one remounts /sys, hiding /sys/fs/cgroup, which slurmd needs.
  setsid nsenter --net="/run/netns/$PREFIX-$n" unshare --uts --mount --propagation private sh -c '
    set -e
    hostname "$1"
    mount -t tmpfs -o mode=1777 tmpfs /tmp
    mount --bind "$2/etc/hosts" /etc/hosts
    mount --bind "$2/etc/slurm" /etc/slurm
    echo $$ > "$2/pids/$1.holder"
    exec sleep infinity' holder "$n" "$STATE" </dev/null >>"$STATE/log/holder-$n.log" 2>&1 &
  local _
  for _ in $(seq 1 50); do
    alive "$(holder_pid "$n")" && return 0
    sleep 0.1
  done
  log "the namespaces of $n did not come up; see $STATE/log/holder-$n.log"
  exit 1
}

start_munge() {
  if [[ -S $MUNGE_SOCKET ]] && alive "$(cat "$STATE/pids/munged.pid" 2>/dev/null)"; then return; fi
  [[ -s /etc/munge/munge.key ]] || {
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chmod 0400 /etc/munge/munge.key
  }
  munged --force --socket="$MUNGE_SOCKET" --pid-file="$STATE/pids/munged.pid" \
    --seed-file="$STATE/munge/munged.seed" --log-file="$STATE/log/munged.log"
}

start_daemons() {
  local n
  alive "$(cat "$STATE/pids/slurmctld.pid" 2>/dev/null)" || in_node login slurmctld
  for n in $(nodes); do
    alive "$(cat "$STATE/pids/slurmd-$n.pid" 2>/dev/null)" || in_node "$n" slurmd -N "$n"
  done
}

# Every node idle (or mixed/allocated), each sinfo bounded in time.
wait_nodes() {
  local k want=$1 up
  for _ in $(seq 1 120); do
    up=$(in_node login timeout 5 sinfo -h -N -p "$PARTITION" -o '%N %T' 2>/dev/null || true)
    k=$(grep -cE ' (idle|mixed|allocated)' <<< "$up" || true)
    if (( k == want )); then log "$want nodes up (partition $PARTITION): $(nodes | paste -sd' ')"; return 0; fi
    while read -r name state; do
      case $state in
        down*|drain*) in_node login timeout 5 scontrol update NodeName="$name" State=RESUME \
                        >/dev/null 2>&1 || true;;
      esac
    done <<< "$up"
    sleep 0.5
  done
  log "the nodes did not come up ($up); see $STATE/log"
  exit 1
}

start() {
  local k=$1
  need_tools
  if [[ -s $STATE/nodes ]] && (( $(nodes | wc -l) != k )); then
    log "a cluster of $(nodes | wc -l) nodes is running; stop it first to change --nodes"
    exit 1
  fi
  [[ -d /etc/slurm ]] || { mkdir -p /etc/slurm; touch "$STATE/created-etc-slurm"; }
  mkdir -p "$STATE"
  write_files "$k"
  make_network
  local n
  for n in login $(nodes); do start_holder "$n"; done
  start_munge
  start_daemons
  wait_nodes "$k"
}

kill_pidfile() {
  local f=$1 pid _
  pid=$(cat "$f" 2>/dev/null || true)
  if alive "$pid"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# Every process left in a node's network namespace (job steps, dask workers): only ours.
kill_netns() {
  local pids
  pids=$(ip netns pids "$PREFIX-$1" 2>/dev/null || true)
  [[ -n $pids ]] && kill $pids 2>/dev/null || true
  sleep 0.2
  pids=$(ip netns pids "$PREFIX-$1" 2>/dev/null || true)
  [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
}

stop() {
  [[ -d $STATE ]] || { log "not running"; return 0; }
  local n f
  for f in "$STATE"/pids/slurmd-*.pid "$STATE/pids/slurmctld.pid"; do
    [[ -e $f ]] && kill_pidfile "$f"
  done
  for n in $(nodes) login; do
    kill_pidfile "$STATE/pids/$n.holder"
    kill_netns "$n"
    ip link del "${PREFIX}v-$n" 2>/dev/null || true
    ip netns del "$PREFIX-$n" 2>/dev/null || true
  done
  kill_pidfile "$STATE/pids/munged.pid"
  if [[ -e $STATE/created-bridge ]]; then
    for _ in $(seq 1 20); do
      ip link del "$BRIDGE" 2>/dev/null || true
      ip link show "$BRIDGE" >/dev/null 2>&1 || break
      sleep 0.2
    done
  fi
  [[ -e $STATE/created-etc-slurm ]] && rmdir /etc/slurm 2>/dev/null || true
  rm -rf "$STATE"
  leftovers
}

# What of this prefix's namespaces and links is still there after stop (exit 1 if anything).
leftovers() {
  local left
  left=$( { ip netns list | awk -v p="$PREFIX-" 'index($1, p) == 1 {print "netns " $1}'
            ip -o link | awk -F': ' -v p="$PREFIX" 'index($2, p) == 1 {print "link " $2}'; } )
  if [[ -n $left ]]; then log "left behind: $(paste -sd' ' <<< "$left")"; exit 1; fi
  log "stopped"
}

status() {
  local n pid
  [[ -s $STATE/nodes ]] || { echo "cluster-local: not running"; return 0; }
  for f in munged slurmctld; do
    pid=$(cat "$STATE/pids/$f.pid" 2>/dev/null || true)
    if alive "$pid"; then echo "$f: running ($pid)"; else echo "$f: stopped"; fi
  done
  for n in login $(nodes); do
    pid=$(cat "$STATE/pids/slurmd-$n.pid" 2>/dev/null || true)
    echo "$n: namespace $PREFIX-$n $(addr_of "$n"), holder $(alive "$(holder_pid "$n")" && echo up || echo down)$(
      [[ $n == login ]] || { alive "$pid" && echo ", slurmd running" || echo ", slurmd stopped"; })"
  done
  in_node login timeout 5 sinfo -N 2>/dev/null || true
}

cmd=${1:-start}
shift || true
nodes_k=3
if [[ $cmd != exec ]]; then
  while (( $# )); do
    case $1 in
      --nodes) nodes_k=${2:?--nodes needs a number}; shift 2;;
      --nodes=*) nodes_k=${1#--nodes=}; shift;;
      *) log "unknown option $1; allowed: --nodes K"; exit 2;;
    esac
  done
  if ! [[ $nodes_k =~ ^[0-9]+$ ]] || (( nodes_k < 1 || nodes_k > 50 )); then
    log "--nodes $nodes_k: allowed: an integer from 1 to 50"; exit 2
  fi
fi
case $cmd in
  start) start "$nodes_k";;
  stop) stop;;
  status) status;;
  exec) [[ $# -ge 2 ]] || { log "usage: $0 exec NODE CMD..."; exit 2; }; IN_NODE_EXEC=1 in_node "$@";;
  *) log "usage: $0 start [--nodes K]|stop|status|exec NODE CMD..."; exit 2;;
esac
