#!/usr/bin/env bash
# Reproduces the "Measured" section of docs/scale-out.md: `workq bench
# --shards` with 1, 2 and 4 shard databases on ONE server (bench_s1..s4,
# created and migrated here), alternately, RUNS times, and prints the
# medians of the total jobs/s and the ratio of each to the 1-shard run.
# The shards share the server's CPUs, so this measures the cost of the
# routing and of the shared handler slots, not scale-out; PRODLIKE=1 adds
# the same runs over N throwaway clusters (scripts/prodlike-cluster.sh),
# one per shard, which on one machine still share its cores.
#
#   ADMIN_URL=postgres://postgres@127.0.0.1:5432/postgres scripts/bench-shards.sh
#   RUNS=3 N=100000 DURATION=20s MODE=continuous scripts/bench-shards.sh
#   ONE_SERVER=0 PRODLIKE=1 scripts/bench-shards.sh   # the two clusters only
set -euo pipefail
cd "$(dirname "$0")/.."
ADMIN_URL=${ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
RUNS=${RUNS:-3}
N=${N:-100000}
DURATION=${DURATION:-20s}
MODE=${MODE:-burn-down} # or continuous
WORKQ_FLAGS=${WORKQ_FLAGS:-}

go build -o bin/workq ./cmd/workq

url_of() { # the admin URL pointed at database $1
  python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$ADMIN_URL" "$1"
}
for i in 1 2 3 4; do
  psql "$ADMIN_URL" -qAtc "select 1 from pg_database where datname = 'bench_s$i'" | grep -q 1 ||
    psql "$ADMIN_URL" -qc "create database bench_s$i"
  bin/workq migrate up --database-url "$(url_of bench_s$i)" >/dev/null
done
shards() { # a comma-separated list of the first $1 shard URLs
  local out="" i
  for i in $(seq 1 "$1"); do out+="${out:+,}s$i=$(url_of bench_s$i)"; done
  echo "$out"
}
mode_flags() { if [ "$MODE" = continuous ]; then echo "--duration $DURATION"; else echo "-n $N"; fi; }

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
total_of() { sed -nE 's/.* = ([0-9.]+) jobs\/s \(.*/\1/p'; }
ratio() { awk -v x="$1" -v y="$2" 'BEGIN {printf "%.2f", x / y}'; }

declare -a r1 r2 r4 plain
[ "${ONE_SERVER:-1}" = 1 ] || RUNS_ONE=0
for run in $(seq 1 "${RUNS_ONE:-$RUNS}"); do
  # The plain single-database bench (no sharding code on the path) beside
  # the 1-shard one: the front door's own cost.
  plain+=("$(bin/workq bench $(mode_flags) --database-url "$(url_of bench_s1)" $WORKQ_FLAGS 2>/dev/null | sed -nE 's/.* = ([0-9.]+) jobs\/s.*/\1/p')")
  for n in 1 2 4; do
    line=$(bin/workq bench $(mode_flags) --shards "$(shards $n)" $WORKQ_FLAGS 2>/dev/null | grep ' over ')
    echo "run $run, $n shard(s): $line"
    v=$(echo "$line" | total_of)
    case $n in 1) r1+=("$v") ;; 2) r2+=("$v") ;; 4) r4+=("$v") ;; esac
  done
done
if [ "${ONE_SERVER:-1}" = 1 ]; then
p=$(printf '%s\n' "${plain[@]}" | median)
m1=$(printf '%s\n' "${r1[@]}" | median)
m2=$(printf '%s\n' "${r2[@]}" | median)
m4=$(printf '%s\n' "${r4[@]}" | median)
echo "medians of $RUNS ($MODE, one server): plain bench $p jobs/s; --shards 1: $m1 ($(ratio "$m1" "$p") of plain); 2: $m2 ($(ratio "$m2" "$m1") of 1 shard); 4: $m4 ($(ratio "$m4" "$m1") of 1 shard)"
fi

if [ "${PRODLIKE:-0}" = 1 ]; then
  # Two throwaway clusters, one per shard (scripts/prodlike-cluster.sh),
  # against one of the same settings.
  PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
  SHARED_BUFFERS=${SHARED_BUFFERS:-2GB}
  source scripts/prodlike-cluster.sh
  datas=()
  trap 'for d in "${datas[@]}"; do DATA=$d; prodlike_stop /dev/null; done' EXIT
  urls=()
  for i in 1 2; do
    PORT=$((5510 + i))
    prodlike_start "workq-shard$i" </dev/null
    datas+=("$DATA")
    u="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
    bin/workq migrate up --database-url "$u" >/dev/null
    urls+=("s$i=$u")
  done
  declare -a c1 c2
  for run in $(seq 1 "$RUNS"); do
    l1=$(bin/workq bench $(mode_flags) --shards "${urls[0]}" $WORKQ_FLAGS 2>/dev/null | grep ' over ')
    l2=$(bin/workq bench $(mode_flags) --shards "${urls[0]},${urls[1]}" $WORKQ_FLAGS 2>/dev/null | grep ' over ')
    echo "run $run, 1 cluster: $l1"
    echo "run $run, 2 clusters: $l2"
    c1+=("$(echo "$l1" | total_of)")
    c2+=("$(echo "$l2" | total_of)")
  done
  k1=$(printf '%s\n' "${c1[@]}" | median)
  k2=$(printf '%s\n' "${c2[@]}" | median)
  echo "medians of $RUNS ($MODE, production-like clusters): 1 cluster $k1 jobs/s; 2 clusters $k2 ($(ratio "$k2" "$k1") of 1)"
fi
