#!/usr/bin/env bash
# bench-sustained.sh: workq (and, with RIVER=path/to/river, River) at full
# speed for DURATION (default 10m) on a throwaway cluster with
# production-like settings and autovacuum on at its defaults. Every minute
# it records each system's jobs/s and the sizes and dead tuples of its
# tables. Each system gets a fresh cluster with the same settings.
#
#   scripts/bench-sustained.sh                       # workq only
#   RIVER=/tmp/river/cmd/river/river scripts/bench-sustained.sh
#   DURATION=2m EVERY=30s scripts/bench-sustained.sh # a short look
#   # side by side, at once, each on its own cluster and port:
#   PORT=5499 DURATION=60m scripts/bench-sustained.sh &
#   PORT=5498 DURATION=60m SKIP_WORKQ=1 RIVER=/path/to/river scripts/bench-sustained.sh
#
# STATEMENTS=1 loads pg_stat_statements and adds each statement's calls and
# total time to every sample (*-statements.tsv): where time goes as the
# tables grow.
#
# Output goes to OUT (default /tmp/sustained-<time>): workq.log, river.log,
# *-sizes.tsv (one row per table per sample) and a summary on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10m}
EVERY=${EVERY:-1m}
PORT=${PORT:-5499}
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
OUT=${OUT:-/tmp/sustained-$(date +%H%M%S)}
SHARED_BUFFERS=${SHARED_BUFFERS:-4GB}
mkdir -p "$OUT"
[ -n "${SKIP_WORKQ:-}" ] || go build -o bin/workq ./cmd/workq

secs() { # 10m -> 600, 30s -> 30
  local d=$1
  case $d in *m) echo $(( ${d%m} * 60 ));; *s) echo "${d%s}";; *h) echo $(( ${d%h} * 3600 ));; *) echo "$d";; esac
}
every_s=$(secs "$EVERY")
dur_s=$(secs "$DURATION")

. scripts/prodlike-cluster.sh
start_cluster() {
  prodlike_start sustained-pg <<<"${STATEMENTS:+shared_preload_libraries = 'pg_stat_statements'}"
  if [ -n "${STATEMENTS:-}" ]; then psqlc -c "create extension pg_stat_statements"; fi
}
stop_cluster() { prodlike_stop "$OUT/$1-server.log"; }
trap 'stop_cluster aborted 2>/dev/null || true' EXIT

URL="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
psqlc() { psql "$URL" -XAtq -F $'\t' "$@"; }

# sample NAME TABLES... : every EVERY, one row per table (and per partition
# of workq.runs and workq.job_runs_done, which are partitioned by day): elapsed seconds, table, total
# size, heap size, live and dead tuples, autovacuum count, inserts so far.
sample() {
  local name=$1; shift
  local list; list=$(printf "'%s'," "$@"); list=${list%,}
  local t0; t0=$(date +%s)
  while sleep "$every_s"; do
    psqlc -c "select $(( $(date +%s) - t0 )), relname, pg_total_relation_size(relid), pg_relation_size(relid), n_live_tup, n_dead_tup, autovacuum_count, n_tup_ins
              from pg_stat_user_tables where relname in ($list) or relname ~ '^(runs|job_runs_done)_(p[0-9]+|default|legacy)$' order by relname" >>"$OUT/$name-sizes.tsv" 2>/dev/null || true
    if [ -n "${STATEMENTS:-}" ]; then
      psqlc -c "select $(( $(date +%s) - t0 )), calls, round(total_exec_time), rows, left(regexp_replace(query, '\s+', ' ', 'g'), 70)
                from pg_stat_statements where calls > 10 order by total_exec_time desc limit 25" >>"$OUT/$name-statements.tsv" 2>/dev/null || true
    fi
  done
}

run_workq() {
  start_cluster
  bin/workq migrate up --database-url "$URL" >/dev/null
  sample workq job_runs runs & local sp=$!
  bin/workq bench --database-url "$URL" --duration "$DURATION" --report-every "$EVERY" --maintenance --json >"$OUT/workq.json" 2>"$OUT/workq.log" || { kill $sp; cat "$OUT/workq.log"; exit 1; }
  kill $sp; wait $sp 2>/dev/null || true
  stop_cluster workq
}

run_river() {
  start_cluster
  "$RIVER" migrate-up --database-url "$URL" >/dev/null
  sample river river_job & local sp=$!
  "$RIVER" bench --database-url "$URL" --duration "$DURATION" >"$OUT/river.log" 2>&1 || { kill $sp; cat "$OUT/river.log"; exit 1; }
  kill $sp; wait $sp 2>/dev/null || true
  stop_cluster river
}

[ -z "${SKIP_WORKQ:-}" ] && run_workq
echo "workq: per-interval jobs/s:"; grep '^interval' "$OUT/workq.log" || true
if [ -n "${RIVER:-}" ]; then
  run_river
  # River prints the jobs worked in every 2 s iteration; sum them per EVERY.
  echo "river: per-interval jobs/s:"
  awk -v every="$every_s" '/\[0s\]$/ {next} /^bench: jobs worked/ {
      n = $5; sub(/[^0-9].*/, "", n); t += 2; sum += n
      if (t % every == 0) { i++; printf "interval %d (to %ds): %.0f jobs/s\n", i, t, sum / every; sum = 0 } }' "$OUT/river.log"
  grep 'overall job/sec' "$OUT/river.log" || true
fi
trap - EXIT
echo "output in $OUT"
