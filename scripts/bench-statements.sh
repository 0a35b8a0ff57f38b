#!/usr/bin/env bash
# Where a burn-down's time goes, per statement: one burn-down of N jobs at
# default flags on a throwaway cluster (own port, pg_stat_statements loaded;
# otherwise the shared test server's settings: shared_buffers 128MB,
# autovacuum off, max_wal_size 1GB, durable commits; but min_wal_size 1GB,
# and its WAL segments made before the run, as on a server in use), fresh
# database, then
# per statement: calls, µs and rows per job, plans per call and planning µs
# per job (PostgreSQL plans a prepared statement again whenever it picks a
# custom plan), WAL bytes per job, shared
# blocks per job; the total WAL per job (pg_current_wal_lsn before and
# after), statements (round trips) per job, the server's CPU per job (all of
# the cluster's processes, exited backends included) and the client's, and
# for workq the Go CPU profile's top entries. PERF=1: also PostgreSQL's CPU
# samples by symbol (perf record of the cluster's processes).
#
#   WORKQ=/tmp/workq-24ac1ab scripts/bench-statements.sh         # a workq build
#   CEILING=1 scripts/bench-statements.sh                        # ../shared/ceiling -batch 500 -c 2
#   MODE=continuous WORKQ=... scripts/bench-statements.sh        # workq bench --duration DURATION (30s), per job worked
#   MODE=rate WORKQ=... scripts/bench-statements.sh              # --rate RATE (1000) --enqueue-batch EBATCH (10) for DURATION
#
# N (200000), PORT (5499), PGBIN (/usr/lib/postgresql/15/bin),
# OUT (/tmp/statements-<name>-<time>): where the tables, the profile and the
# server log go. The extension stays on this cluster only; the shared server
# is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200000}
PORT=${PORT:-5499}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
CEILING_DIR=${CEILING_DIR:-../shared/ceiling}
[ -d "$CEILING_DIR" ] || CEILING_DIR=/work/shared/ceiling
if [ -n "${CEILING:-}" ]; then name=ceiling; else : "${WORKQ:?set WORKQ to a workq binary, or CEILING=1}"; name=$(basename "$WORKQ"); fi
OUT=${OUT:-/tmp/statements-$name-$(date +%H%M%S)}
mkdir -p "$OUT"

. scripts/prodlike-cluster.sh
trap 'prodlike_stop "$OUT/server.log"' EXIT
testlike_start stmts <<CONF
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.max = 5000
pg_stat_statements.track = top
pg_stat_statements.track_planning = on
min_wal_size = 1GB
CONF
BASE=postgres://postgres@127.0.0.1:$PORT
URL="$BASE/bench?sslmode=disable"
psql -qX "$BASE/postgres" -c "create database bench"
psql -qX "$URL" -c "create extension pg_stat_statements"
# A new cluster has one WAL segment: a run would create (and zero-fill) a
# new 16 MB file every 16 MB of WAL, inside its commits, where a server in
# use recycles old ones. In a continuous run of 20 s that was about 7% of
# the server's CPU (XLogFileInit under the commits' XLogFlush, perf), and
# not the same share in every mode. So fill max_wal_size with WAL first,
# and keep it (min_wal_size 1GB): the run recycles segments, as the
# shared server's runs do.
# About 1.2 GB of WAL (~1,000 bytes a row); the last checkpoint keeps it
# as segments to recycle (min_wal_size), about 64 of them.
psql -qX -v ON_ERROR_STOP=1 "$BASE/postgres" \
  -c "create table wal_warmup as select g, repeat('w', 900) as pad from generate_series(1, 1200000) g" \
  -c "drop table wal_warmup" -c "checkpoint"
segs=$(psql -qXAt "$BASE/postgres" -c "select count(*) from pg_ls_waldir() where name ~ '^[0-9A-F]{24}$'")
[ "$segs" -ge 60 ] || { echo "bench-statements.sh: only $segs WAL segments after the warm-up (want about 64)" >&2; exit 1; }

# CPU seconds of the whole cluster: the postmaster's reaped children
# (cutime, cstime: backends that exited) plus every live process's own.
server_cpu() {
  local pm; pm=$(head -1 "$DATA/data/postmaster.pid")
  { awk '{print $16 + $17}' "/proc/$pm/stat"
    for p in $(pgrep -P "$pm") "$pm"; do awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || true; done
  } | awk -v hz="$(getconf CLK_TCK)" '{s += $1} END {printf "%.2f", s / hz}'
}
q() { psql -qXAt "$URL" -c "$1"; }

if [ -n "${CEILING:-}" ]; then
  (cd "$CEILING_DIR" && go build -o "$OUT/ceiling" .)
  run=("$OUT/ceiling" -url "$URL" -n "$N" -batch 500 -c 2)
else
  DATABASE_URL=$URL "$WORKQ" migrate up >/dev/null
  run=("$WORKQ" bench --database-url "$URL" -n "$N" --cpuprofile "$OUT/cpu.prof")
  [ "${MODE:-}" = continuous ] && run=("$WORKQ" bench --database-url "$URL" --duration "${DURATION:-30s}" --cpuprofile "$OUT/cpu.prof")
  [ "${MODE:-}" = rate ] && run=("$WORKQ" bench --database-url "$URL" --duration "${DURATION:-30s}" --rate "${RATE:-1000}" --enqueue-batch "${EBATCH:-10}" --cpuprofile "$OUT/cpu.prof")
fi
q "checkpoint"
q "select pg_stat_statements_reset()" >/dev/null
lsn0=$(q "select pg_current_wal_lsn()")
cpu0=$(server_cpu)
if [ -n "${PERF:-}" ]; then # the cluster's processes, the backends forked later included
  perf record -q -F 999 -g -p "$(head -1 "$DATA/data/postmaster.pid")" -o "$OUT/perf.data" >/dev/null 2>&1 &
  perfpid=$!
  sleep 0.5
fi
/usr/bin/time -f '%U %S' -o "$OUT/client.time" "${run[@]}" >"$OUT/bench.log" 2>&1
sleep 1 # let the backends exit, so their CPU is in the postmaster's cutime
cpu1=$(server_cpu)
if [ -n "${PERF:-}" ]; then kill -INT "$perfpid"; wait "$perfpid" || true; fi
wal=$(q "select pg_current_wal_lsn() - '$lsn0'::pg_lsn")
# continuous: per job worked (the producer inserts more than that)
[ "${MODE:-}" = continuous ] && N=$(sed -nE 's/^continuous: ([0-9]+) jobs in .*/\1/p' "$OUT/bench.log")
[ "${MODE:-}" = rate ] && N=$(sed -nE 's/^rate(-batched)?: ([0-9]+) jobs in .*/\2/p' "$OUT/bench.log")
rate=$(grep -E ' = [0-9.]+ (rows|jobs)/s' "$OUT/bench.log" | sed -E 's/.* = ([0-9.]+) (rows|jobs)\/s.*/\1/')

# Per statement, per job. A sqlc query is named by its "-- name:" line; other
# statements by their first 70 characters.
psql -qX "$URL" -v n="$N" >"$OUT/statements.txt" <<'SQL'
\pset footer off
select coalesce(substring(query from '-- name: (\w+)'), left(regexp_replace(query, '\s+', ' ', 'g'), 70)) as statement,
       calls,
       round((calls::numeric * 1000 / :n), 2) as calls_per_1k_jobs,
       round((rows::numeric / greatest(calls, 1)), 1) as rows_per_call,
       round((total_exec_time * 1000 / :n)::numeric, 2) as us_per_job,
       round(plans::numeric / greatest(calls, 1), 2) as plans_per_call,
       round((total_plan_time * 1000 / :n)::numeric, 2) as plan_us_per_job,
       round(wal_bytes / :n, 1) as wal_b_per_job,
       round(wal_fpi::numeric / :n, 4) as fpi_per_job,
       round(shared_blks_hit::numeric / :n, 2) as hit_per_job,
       round(shared_blks_read::numeric / :n, 3) as read_per_job,
       round(shared_blks_dirtied::numeric / :n, 3) as dirtied_per_job
from pg_stat_statements s join pg_database d on d.oid = s.dbid and d.datname = 'bench'
where query not ilike '%pg_stat_statements%'
order by total_exec_time desc;
select sum(calls) as statements, round(sum(calls)::numeric * 1000 / :n, 2) as statements_per_1k_jobs,
       round((sum(total_exec_time) * 1000 / :n)::numeric, 2) as us_per_job,
       round((sum(total_plan_time) * 1000 / :n)::numeric, 2) as plan_us_per_job,
       round(sum(wal_bytes) / :n, 1) as stmt_wal_b_per_job
from pg_stat_statements s join pg_database d on d.oid = s.dbid and d.datname = 'bench'
where query not ilike '%pg_stat_statements%';
SQL
read -r cu cs <"$OUT/client.time"
{
  echo "$name ${MODE:-burn-down}: $N jobs, $rate jobs/s; load $(cut -d' ' -f1-3 /proc/loadavg)"
  awk -v w="$wal" -v n="$N" -v s0="$cpu0" -v s1="$cpu1" -v cu="$cu" -v cs="$cs" 'BEGIN {
    printf "total WAL %.0f bytes per job (whole run, insert included); server CPU %.1f µs per job; client CPU %.1f µs per job (user %.2fs sys %.2fs)\n",
      w / n, (s1 - s0) * 1e6 / n, (cu + cs) * 1e6 / n, cu, cs }'
  cat "$OUT/statements.txt"
  if [ -f "$OUT/cpu.prof" ]; then
    echo "Go CPU profile, top 25 by flat:"
    go tool pprof -top -nodecount=25 "$WORKQ" "$OUT/cpu.prof" 2>/dev/null | sed -n '1,32p'
    echo "Go CPU profile, top 25 by cum:"
    go tool pprof -top -cum -nodecount=25 "$WORKQ" "$OUT/cpu.prof" 2>/dev/null | sed -n '6,32p'
  fi
  if [ -f "$OUT/perf.data" ]; then
    echo "PostgreSQL's CPU samples (perf, the cluster's processes), top 40 symbols:"
    perf report -i "$OUT/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null | grep -v '^#' | grep '%' | grep -v '^ *|' | grep -v -- '--' | head -40
  fi
} | tee "$OUT/summary.txt"
echo "output in $OUT" >&2
