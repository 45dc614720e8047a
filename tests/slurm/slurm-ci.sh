#!/usr/bin/env bash
# A real single-node Slurm on localhost for the integration test (tests/test_slurm.py) and CI:
#   tests/slurm/slurm-ci.sh up     install (Debian packages), configure and start munge, MariaDB,
#                                  slurmdbd, slurmctld and slurmd, with FAKE_GPUS fake GPUs
#   tests/slurm/slurm-ci.sh down   cancel the jobs left in its queue, stop exactly the daemons
#                                  started here (by their pid files), put /etc/slurm back
# An existing /etc/slurm is copied to /etc/slurm.aiayn-ci-backup before `up` writes its own and
# moved back by `down` (an /etc/slurm that did not exist is removed again). Left installed: the
# packages, /etc/munge/munge.key (created if missing), the MariaDB database and user of slurmdbd.
# Needs root. With accounting (slurmdbd) the Slurm executor plugin's default status command
# (sacct) works as on a real cluster. Env: FAKE_GPUS (2), FAKE_CPUS (8), SLURM_CI_TMP.
set -euo pipefail
FAKE_GPUS=${FAKE_GPUS:-2}; FAKE_CPUS=${FAKE_CPUS:-8}
WORK=${SLURM_CI_TMP:-${TMPDIR:-/tmp}/slurm-ci}
PIDS="/run/slurmd.pid /run/slurmctld.pid /run/slurmdbd.pid /run/mysqld/mysqld.pid /run/munge/munged.pid"

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

down() {
  # jobs left in the queue (a killed test run) would come back with the next `up`: Slurm keeps them
  # in its StateSaveLocation
  if [ -f /run/slurmctld.pid ] && command -v squeue >/dev/null; then
    squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
    for _ in $(seq 1 40); do [ -z "$(squeue -h -t R,CG -o %i 2>/dev/null)" ] && break; sleep 0.25; done
  fi
  for f in $PIDS; do stop_pidfile "$f"; done
  restore_conf
}

write_conf() {
  backup_conf
  read -r _ _ _ _ MEM <<<"$(slurmd -C | head -1 | sed -E 's/.*CPUs=([0-9]+) Boards=[0-9]+ SocketsPerBoard=([0-9]+) CoresPerSocket=([0-9]+) ThreadsPerCore=([0-9]+) RealMemory=([0-9]+).*/\1 \2 \3 \4 \5/')"
  MEM=$((MEM - 512))
  mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
  cat > /etc/slurm/slurm.conf <<CONF
ClusterName=ci
SlurmctldHost=localhost
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
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
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$FAKE_CPUS SocketsPerBoard=1 CoresPerSocket=$FAKE_CPUS ThreadsPerCore=1 RealMemory=$MEM Gres=gpu:$FAKE_GPUS State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE MaxNodes=1 State=UP
CONF
  mkdir -p "$WORK/fakegpu"   # gres/gpu needs character devices; fake ones are enough
  for i in $(seq 0 $((FAKE_GPUS - 1))); do [ -e "$WORK/fakegpu/nvidia$i" ] || mknod "$WORK/fakegpu/nvidia$i" c 195 "$i"; done
  printf 'AutoDetect=off\nName=gpu File=%s/fakegpu/nvidia[0-%d]\n' "$WORK" $((FAKE_GPUS - 1)) > /etc/slurm/gres.conf
  printf 'AuthType=auth/munge\nDbdHost=localhost\nSlurmUser=root\nLogFile=/var/log/slurm/slurmdbd.log\nPidFile=/run/slurmdbd.pid\nStorageType=accounting_storage/mysql\nStorageHost=localhost\nStorageUser=slurm\nStoragePass=slurmci\nStorageLoc=slurm_acct_db\n' > /etc/slurm/slurmdbd.conf
  chmod 600 /etc/slurm/slurmdbd.conf
}

up() {
  mkdir -p "$WORK"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    munge slurmctld slurmd slurm-client slurmdbd mariadb-server >"$WORK/apt.log" 2>&1 \
    || { echo "apt-get install failed ($WORK/apt.log):" >&2; tail -20 "$WORK/apt.log" >&2; exit 1; }
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
  /usr/sbin/slurmd -N localhost
  wait_for bash -c 'sinfo -h -o %T | grep -qx idle' || { sinfo -R; tail -20 /var/log/slurm/slurmctld.log; exit 1; }
  echo "slurm is up: $(sinfo -h -o '%P %D %c CPUs %G %T')"
}

"${1:-up}"
