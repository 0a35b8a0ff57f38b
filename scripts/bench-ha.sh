#!/usr/bin/env bash
# What a synchronous standby costs workq (docs/scale-out.md, tier 1): one
# throwaway production-like primary (scripts/prodlike-cluster.sh) with a
# streaming standby on the same machine, and `workq bench` at the defaults
# run in interleaved pairs: the standby asynchronous
# (synchronous_standby_names = '') then synchronous ('*'), switched by a
# reload between runs. Prints each run's jobs/s, the WAL it wrote per job,
# and the sync/async ratio of each pair; the median of the ratios is the
# figure.
#
#   RUNS=5 DURATION=20s scripts/bench-ha.sh
#
# Both clusters share this machine's cores and disk, so the figure is the
# cost of waiting for a second fsync and a loopback round trip; over a real
# network add the link's round trip to each batch's commit.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

RUNS=${RUNS:-5}
DURATION=${DURATION:-20s}
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
SHARED_BUFFERS=${SHARED_BUFFERS:-2GB}
PORT=${PORT:-55441}
STANDBY_PORT=${STANDBY_PORT:-55442}
. scripts/prodlike-cluster.sh

BIN=$(mktemp -d)/workq
go build -o "$BIN" ./cmd/workq

prodlike_start workq-ha-primary <<CONF
wal_level = replica
max_wal_senders = 4
synchronous_standby_names = ''
CONF
PRIMARY=$DATA
STANDBY=$(mktemp -d /tmp/workq-ha-standby.XXXXXX)
[ "$(id -u)" = 0 ] && chown postgres "$STANDBY"
cleanup() {
  as_pg "$PGBIN/pg_ctl" -D "$STANDBY/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$STANDBY"
  DATA=$PRIMARY prodlike_stop /dev/null
}
trap cleanup EXIT

as_pg "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$PORT" -U postgres -D "$STANDBY/data" -R -X stream \
  -d "application_name=standby1" >/dev/null
cat >>"$STANDBY/data/postgresql.conf" <<CONF
port = $STANDBY_PORT
unix_socket_directories = '$STANDBY'
hot_standby = on
CONF
as_pg "$PGBIN/pg_ctl" -D "$STANDBY/data" -l "$STANDBY/server.log" -w -t 60 start >/dev/null

ADMIN="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
URL="postgres://postgres@127.0.0.1:$PORT/bench?sslmode=disable"
psql "$ADMIN" -qAtc "create database bench"
"$BIN" migrate up --database-url "$URL" >/dev/null

mode() { # mode async|sync
  local names=''
  [ "$1" = sync ] && names='*'
  psql "$ADMIN" -qAtc "alter system set synchronous_standby_names = '$names'" -c "select pg_reload_conf()" >/dev/null
  sleep 1
  local state
  state=$(psql "$ADMIN" -qAtc "select sync_state from pg_stat_replication where application_name = 'standby1'")
  [ "$1" = sync ] && [ "$state" != sync ] && { echo "standby is $state, want sync" >&2; exit 1; }
  [ "$1" = async ] && [ "$state" != async ] && { echo "standby is $state, want async" >&2; exit 1; }
  return 0
}

run() { # run MODE: prints "jobs/s wal-bytes-per-job"
  mode "$1"
  psql "$URL" -qAtc "truncate workq.job_runs" -c "vacuum analyze workq.job_runs" >/dev/null
  local before after out jobs rate
  before=$(psql "$ADMIN" -qAtc "select pg_current_wal_lsn()")
  out=$("$BIN" bench --duration "$DURATION" --database-url "$URL" 2>&1 | grep '^continuous:')
  after=$(psql "$ADMIN" -qAtc "select pg_wal_lsn_diff(pg_current_wal_lsn(), '$before')")
  jobs=$(sed -E 's/^continuous: ([0-9]+) jobs.*/\1/' <<<"$out")
  rate=$(sed -E 's/.*= ([0-9]+) jobs\/s.*/\1/' <<<"$out")
  echo "$rate $(( ${after%.*} / jobs ))"
}

ratios=()
for i in $(seq 1 "$RUNS"); do
  read -r a awal < <(run async)
  read -r s swal < <(run sync)
  r=$(awk -v s="$s" -v a="$a" 'BEGIN { printf "%.3f", s / a }')
  ratios+=("$r")
  echo "pair $i: async $a jobs/s ($awal B WAL/job), sync $s jobs/s ($swal B WAL/job), sync/async $r"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print "median sync/async: " v[int((NR + 1) / 2)] }'
