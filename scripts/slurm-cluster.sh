#!/usr/bin/env bash
# A real two-node Slurm cluster on this machine, with fake GPUs, for tests
# and for trying `gpuplan serve --engine slurm` (../shared/notes/slurm-local.md).
#   slurm-cluster.sh start DIR [GPUS_PER_NODE [SHARDS_PER_GPU [GPU_TYPE]]]
#                                                prints `export SLURM_CONF=...`
#   slurm-cluster.sh stop DIR                    stops the daemons by their pids
# CPUS=N (start) declares N CPUs a node (default 8; the operator's case of
# issue 56 had 2, where a node runs at most 2 jobs at once).
# ACCOUNTING=1 (start) adds job accounting, so `sacct` works: a MariaDB
# server and slurmdbd of this cluster's own, under DIR (Debian's
# mariadb-server and slurmdbd; `gpuplan trace import-slurm`'s tests use it).
# Needs root and Debian's slurm-wlm (scripts/setup.sh native installs it).
# Ports are picked free, so several clusters (parallel tests) never collide.
set -euo pipefail
cmd="${1:?usage: slurm-cluster.sh start|stop DIR [GPUS_PER_NODE [SHARDS_PER_GPU [GPU_TYPE]]]}"
dir="${2:?usage: slurm-cluster.sh start|stop DIR [GPUS_PER_NODE [SHARDS_PER_GPU [GPU_TYPE]]]}"
gpus="${3:-4}"
# SHARDS_PER_GPU > 0 adds gres/shard (GPU sharing), for trying it by hand;
# the tests use none (docs/slurm.md, "Sharing"). GPU_TYPE is the GRES type
# the round sees (`v100` gives the planner a GPU memory, so it may pair jobs).
shards="${4:-0}"
gtype="${5:-fake}"
cpus="${CPUS:-8}"

stop() {
  for f in "$dir"/slurmd-*.pid "$dir"/ctld.pid "$dir"/dbd.pid "$dir"/db.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  # slurmd forks slurmstepd per job; leave none behind.
  for i in $(seq 1 50); do
    alive=0
    for f in "$dir"/slurmd-*.pid "$dir"/ctld.pid "$dir"/dbd.pid "$dir"/db.pid; do
      [ -f "$f" ] || continue
      pid=$(cat "$f" 2>/dev/null || true)
      [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && alive=1
    done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for f in "$dir"/slurmd-*.pid "$dir"/ctld.pid "$dir"/dbd.pid "$dir"/db.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
  # A step daemon's command line does not name the dir, but it inherits
  # slurmd's environment, which does (SLURM_CONF). Its jobs' processes go
  # with it: killed first, from the leaves up, so none outlives its step.
  for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
    # (A step daemon of another cluster may end meanwhile: no message.)
    env=$({ tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null || true)
    if grep -qxF "SLURM_CONF=$dir/slurm.conf" <<< "$env"; then
      tree="$p" next="$p"
      while [ -n "$next" ]; do
        kids=""
        for q in $next; do kids="$kids $(pgrep -P "$q" 2>/dev/null || true)"; done
        next=$(echo $kids)
        tree="$next $tree"
      done
      kill -9 $tree 2>/dev/null || true
    fi
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

case "$cmd" in
  stop) stop; exit 0 ;;
  start) ;;
  *) echo "slurm-cluster.sh: unknown command $cmd" >&2; exit 2 ;;
esac

command -v slurmctld >/dev/null || { echo "slurm-cluster.sh: slurmctld not found (apt-get install slurm-wlm)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "slurm-cluster.sh: needs root (slurmd runs jobs as their users)" >&2; exit 1; }

mkdir -p /run/munge && chown munge:munge /run/munge
# Parallel tests start clusters at once: one of them starts munged, under a
# lock, or the second munged fails to bind the socket the first just took.
exec 9>/run/munge/gpuplan-start.lock
flock 9
if ! pgrep -x munged >/dev/null; then
  munged --force
fi
for i in $(seq 1 50); do
  [ -S /run/munge/munge.socket.2 ] && break
  sleep 0.1
done
flock -u 9
exec 9>&-

mkdir -p "$dir"/{state,log,spool/n1,spool/n2}
for g in $(seq 0 $((gpus - 1))); do
  [ -e "$dir/gpu$g" ] || mknod "$dir/gpu$g" c 1 3
done
host=$(hostname -s)
if [ "$shards" -gt 0 ]; then
  gres_types=gpu,shard; node_gres="gpu:$gtype:$gpus,shard:$((gpus * shards))"
else
  gres_types=gpu; node_gres="gpu:$gtype:$gpus"
fi
ctld=$(free_port); p1=$(free_port); p2=$(free_port)
# CPUs are declared, not detected (config_overrides): one task per node per
# job, so 8 CPUs let each node hold up to 8 jobs on a 2-core machine.
cat > "$dir/slurm.conf" <<EOF
ClusterName=gp
SlurmctldHost=$host
SlurmctldPort=$ctld
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/ctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/ctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=$gres_types
ReturnToService=2
SchedulerParameters=sched_interval=1
MinJobAge=600
KillWait=5
InactiveLimit=0
MpiDefault=none
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$p1 CPUs=$cpus Gres=$node_gres State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$p2 CPUs=$cpus Gres=$node_gres State=UNKNOWN
PartitionName=all Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
if [ "${ACCOUNTING:-0}" = 1 ]; then
  command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null ||
    { echo "slurm-cluster.sh: ACCOUNTING=1 needs slurmdbd and mariadb-server" >&2; exit 1; }
  dbport=$(free_port); dbdport=$(free_port)
  mkdir -p "$dir/db"
  [ -d "$dir/db/mysql" ] || mariadb-install-db --no-defaults --datadir="$dir/db" --user=root \
    --auth-root-authentication-method=socket > "$dir/log/db-install.log" 2>&1
  mariadbd --no-defaults --datadir="$dir/db" --user=root --port="$dbport" \
    --bind-address=127.0.0.1 --skip-name-resolve --socket="$dir/db/sock" \
    --pid-file="$dir/db.pid" --log-error="$dir/log/db.log" --innodb-buffer-pool-size=32M &
  for i in $(seq 1 100); do [ -S "$dir/db/sock" ] && break; sleep 0.2; done
  mariadb --no-defaults --socket="$dir/db/sock" -u root -e \
    "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'gp'; GRANT ALL ON *.* TO 'slurm'@'127.0.0.1';"
  cat > "$dir/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbdport
SlurmUser=root
PidFile=$dir/dbd.pid
LogFile=$dir/log/dbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$dbport
StorageUser=slurm
StoragePass=gp
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$dir/slurmdbd.conf"
  cat >> "$dir/slurm.conf" <<EOF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbdport
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
EOF
fi
{
  echo "NodeName=n[1-2] Name=gpu Type=$gtype File=$dir/gpu[0-$((gpus - 1))]"
  # One line per GPU: a shard belongs to its device.
  if [ "$shards" -gt 0 ]; then
    for g in $(seq 0 $((gpus - 1))); do
      echo "NodeName=n[1-2] Name=shard Count=$shards File=$dir/gpu$g"
    done
  fi
} > "$dir/gres.conf"
export SLURM_CONF="$dir/slurm.conf"
if [ "${ACCOUNTING:-0}" = 1 ]; then
  # slurmdbd reads slurmdbd.conf beside $SLURM_CONF; the cluster is
  # registered before slurmctld first reports to it.
  slurmdbd
  for i in $(seq 1 100); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.2; done
  sacctmgr -i add cluster gp >/dev/null
fi
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N n1
slurmd -f "$SLURM_CONF" -N n2
for i in $(seq 1 100); do
  if sinfo -h -o '%T %D' 2>/dev/null | grep -q '^idle 2$'; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "slurm-cluster.sh: the cluster did not come up in 20 s; logs in $dir/log" >&2
sinfo >&2 || true
stop
exit 1
