#!/usr/bin/env bash
# A real Slurm of two compute nodes on this one machine, for the integration tests
# (tests/test_slurm.py) and CI:
#   tests/slurm/slurm-ci.sh up     install (Debian packages), configure and start munge, MariaDB,
#                                  slurmdbd and slurmctld here, and one slurmd per node, each with
#                                  FAKE_GPUS fake GPUs
#   tests/slurm/slurm-ci.sh down   cancel the jobs left in its queue, stop exactly the daemons
#                                  started here (by their pid files), remove the nodes' network, put
#                                  /etc/slurm back
# The nodes (node1, node2, ...: SLURM_CI_NODES of them, default 2) are network namespaces this
# script creates (aiayn-ci-node1, ...), each with its own hostname (a UTS namespace around its
# slurmd) and its own address ($SLURM_CI_NET.11, .12, ...), joined by a veth pair each to the
# bridge aiaynci0 ($SLURM_CI_NET.1, where slurmctld and slurmdbd answer): a training job on two
# nodes rendezvous and all-reduces over that network as across real machines. Traffic stays
# between those namespaces (no route out, no forwarding); the nodes' /etc/hosts is
# /etc/netns/aiayn-ci-node<N>/hosts (bound over /etc/hosts in the node's own mount namespace), the
# machine's own is not touched.
# Several slurmd on one host the other way (Slurm's --enable-multiple-slurmd) is not in Debian's
# build, and would share one address and hostname, which is what multi-node training must not.
# An existing /etc/slurm is copied to /etc/slurm.aiayn-ci-backup before `up` writes its own and
# moved back by `down` (an /etc/slurm that did not exist is removed again). Left installed: the
# packages, /etc/munge/munge.key (created if missing), the MariaDB database and user of slurmdbd.
# Needs root (namespaces, daemons). With accounting (slurmdbd) the Slurm executor plugin's
# default status command (sacct) works as on a real cluster.
# Env: SLURM_CI_NODES (2), FAKE_GPUS (2 per node), FAKE_CPUS (8 per node), SLURM_CI_TMP,
# SLURM_CI_NET (10.251.37: the /24 of the bridge and nodes; pick another if yours uses it).
set -euo pipefail
NODES=${SLURM_CI_NODES:-2}; FAKE_GPUS=${FAKE_GPUS:-2}; FAKE_CPUS=${FAKE_CPUS:-8}
WORK=${SLURM_CI_TMP:-${TMPDIR:-/tmp}/slurm-ci}
NET=${SLURM_CI_NET:-10.251.37}
BRIDGE=aiaynci0
PIDS="/run/slurmctld.pid /run/slurmdbd.pid /run/mysqld/mysqld.pid /run/munge/munged.pid"
node_pid() { echo "/run/slurmd-node$1.pid"; }   # SlurmdPidFile=/run/slurmd-%n.pid
netns() { echo "aiayn-ci-node$1"; }
node_addr() { echo "$NET.$((10 + $1))"; }

wait_for() { for _ in $(seq 1 240); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done; return 1; }
stop_pidfile() {
  [ -f "$1" ] || return 0
  local p; p=$(cat "$1"); kill -TERM "$p" 2>/dev/null || return 0
  for _ in $(seq 1 80); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.25; done
  kill -KILL "$p" 2>/dev/null || true
}

BACKUP=/etc/slurm.aiayn-ci-backup   # what /etc/slurm was before `up` (a folder, or a file `absent`)

backup_conf() {
  [ -e "$BACKUP" ] && return 0   # an earlier `up` without its `down`: the backup already holds the original
  if [ -d /etc/slurm ]; then cp -a /etc/slurm "$BACKUP"; else touch "$BACKUP"; fi
}

restore_conf() {
  [ -e "$BACKUP" ] || return 0
  rm -rf /etc/slurm
  if [ -d "$BACKUP" ]; then mv "$BACKUP" /etc/slurm; else rm -f "$BACKUP"; fi
}

must() {   # one step of the nodes' network, whose failure says what it needs
  "$@" && return 0
  echo "slurm-ci.sh: '$*' failed: the nodes' network needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN (network namespaces, veth, a bridge)" >&2
  return 1
}

net_up() {
  # the bridge and one namespace per node (called as `net_up || ...`, where set -e does not hold:
  # every step returns on failure itself)
  if ip -4 route show | grep -q "^$NET\.0/24"; then
    echo "slurm-ci.sh: $NET.0/24 is already routed on this machine; set SLURM_CI_NET to a free /24" >&2
    return 1
  fi
  must ip link add "$BRIDGE" type bridge || return 1
  must ip addr add "$NET.1/24" dev "$BRIDGE" || return 1
  must ip link set "$BRIDGE" up || return 1
  mkdir -p /etc/netns || return 1
  local i j ns
  for i in $(seq 1 "$NODES"); do
    ns=$(netns "$i")
    must ip netns add "$ns" || return 1
    must ip link add "aiaynci-n$i" type veth peer name ci0 netns "$ns" || return 1
    must ip link set "aiaynci-n$i" master "$BRIDGE" up || return 1
    must ip -n "$ns" addr add "$(node_addr "$i")/24" dev ci0 || return 1
    must ip -n "$ns" link set ci0 up || return 1
    must ip -n "$ns" link set lo up || return 1
    mkdir -p "/etc/netns/$ns" || return 1
    {
      printf '127.0.0.1\tlocalhost\n%s\t%s\n' "$NET.1" "$(hostname -s)"
      for j in $(seq 1 "$NODES"); do printf '%s\tnode%s\n' "$(node_addr "$j")" "$j"; done
    } >"/etc/netns/$ns/hosts" || return 1
  done
}

net_down() {
  local ns
  local link
  # the veth pairs first: a deleted namespace takes its end along only some time later
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^aiaynci-n[0-9]+$'); do
    ip link del "$link" 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk '/^aiayn-ci-node[0-9]+/ {print $1}'); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true   # what a killed job left
    ip netns del "$ns"
    rm -rf "/etc/netns/$ns"
  done
  rmdir /etc/netns 2>/dev/null || true   # only if this script made it (it is empty then)
  if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE"; fi
}

down() {
  # jobs left in the queue (a killed test run) would come back with the next `up`: Slurm keeps them
  # in its StateSaveLocation
  if [ -f /run/slurmctld.pid ] && command -v squeue >/dev/null; then
    squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
    for _ in $(seq 1 40); do [ -z "$(squeue -h -t R,CG -o %i 2>/dev/null)" ] && break; sleep 0.25; done
  fi
  local f
  for f in /run/slurmd-node*.pid /run/slurmd.pid $PIDS; do stop_pidfile "$f"; done
  net_down
  restore_conf
}

write_conf() {
  backup_conf
  read -r _ _ _ _ MEM <<<"$(slurmd -C | head -1 | sed -E 's/.*CPUs=([0-9]+) Boards=[0-9]+ SocketsPerBoard=([0-9]+) CoresPerSocket=([0-9]+) ThreadsPerCore=([0-9]+) RealMemory=([0-9]+).*/\1 \2 \3 \4 \5/')"
  MEM=$((MEM - 512))
  mkdir -p /etc/slurm /var/spool/slurmctld /var/log/slurm
  for i in $(seq 1 "$NODES"); do mkdir -p "/var/spool/slurmd/node$i"; done
  {
    cat <<CONF
ClusterName=ci
SlurmctldHost=$(hostname -s)($NET.1)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
EnforcePartLimits=ALL
MinJobAge=300
KillWait=30
JobRequeue=1
JobAcctGatherType=jobacct_gather/linux
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$NET.1
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
GresTypes=gpu
CONF
    for i in $(seq 1 "$NODES"); do
      echo "NodeName=node$i NodeAddr=$(node_addr "$i") CPUs=$FAKE_CPUS SocketsPerBoard=1 CoresPerSocket=$FAKE_CPUS ThreadsPerCore=1 RealMemory=$MEM Gres=gpu:$FAKE_GPUS State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE MaxNodes=$NODES State=UP"
  } >/etc/slurm/slurm.conf
  mkdir -p "$WORK/fakegpu"   # gres/gpu needs character devices; fake ones are enough (shared by the nodes)
  for i in $(seq 0 $((FAKE_GPUS - 1))); do [ -e "$WORK/fakegpu/nvidia$i" ] || mknod "$WORK/fakegpu/nvidia$i" c 195 "$i"; done
  printf 'AutoDetect=off\nName=gpu File=%s/fakegpu/nvidia[0-%d]\n' "$WORK" $((FAKE_GPUS - 1)) >/etc/slurm/gres.conf
  printf 'AuthType=auth/munge\nDbdHost=localhost\nSlurmUser=root\nLogFile=/var/log/slurm/slurmdbd.log\nPidFile=/run/slurmdbd.pid\nStorageType=accounting_storage/mysql\nStorageHost=localhost\nStorageUser=slurm\nStoragePass=slurmci\nStorageLoc=slurm_acct_db\n' >/etc/slurm/slurmdbd.conf
  chmod 600 /etc/slurm/slurmdbd.conf
}

up() {
  mkdir -p "$WORK"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    munge slurmctld slurmd slurm-client slurmdbd mariadb-server iproute2 util-linux >"$WORK/apt.log" 2>&1 \
    || { echo "apt-get install failed ($WORK/apt.log):" >&2; tail -20 "$WORK/apt.log" >&2; exit 1; }
  net_down   # an earlier `up` without its `down`
  net_up || { net_down; exit 1; }
  [ -s /etc/munge/munge.key ] || { mungekey --create; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
  install -d -o munge -g munge -m 755 /run/munge
  runuser -u munge -- /usr/sbin/munged
  wait_for bash -c 'munge -n | unmunge'
  write_conf
  install -d -o mysql -g root -m 755 /run/mysqld
  setsid /usr/sbin/mariadbd --user=mysql --skip-log-error >"$WORK/mariadbd.log" 2>&1 </dev/null &
  wait_for mysqladmin ping
  mysql -u root -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmci'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  /usr/sbin/slurmdbd
  wait_for sacctmgr -n list cluster
  sacctmgr -i add cluster ci >/dev/null || true
  sacctmgr -i add account ci_acct Description=ci Organization=ci >/dev/null || true
  sacctmgr -i add user root Account=ci_acct DefaultAccount=ci_acct >/dev/null || true
  /usr/sbin/slurmctld -i
  for i in $(seq 1 "$NODES"); do
    # the node's own network, hostname and /etc/hosts; slurmd daemonizes in them. Not `ip netns
    # exec`: it remounts /sys without the cgroup mounts, and slurmd does not start without them
    nsenter --net="/run/netns/$(netns "$i")" unshare --uts --mount --propagation slave sh -c \
      "mount --bind /etc/netns/$(netns "$i")/hosts /etc/hosts && hostname node$i && exec /usr/sbin/slurmd -N node$i"
  done
  wait_for bash -c "[ \"\$(sinfo -h -N -o %T | grep -cx idle)\" = $NODES ]" \
    || { sinfo -N -R; tail -20 /var/log/slurm/slurmctld.log; tail -5 /var/log/slurm/slurmd-node*.log; exit 1; }
  echo "slurm is up: $(sinfo -h -o '%P %D nodes (%N) %c CPUs %G each %T')"
}

"${1:-up}"
