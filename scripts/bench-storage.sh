#!/usr/bin/env bash
# Bytes written and kept per finished job: one burn-down of N jobs at
# default flags on a fresh database per system, then WAL (pg_current_wal_lsn
# before and after, a CHECKPOINT first so each starts alike) and, after a
# plain VACUUM, the sizes of the tables it leaves (heap, indexes, TOAST)
# divided by N: the work table (job_runs, river_job), workq's done table and
# its run archive. Systems:
# this tree, BEFORE (a commit; optional) and River's CLI (RIVER=/path/to/river;
# optional, `river bench --num-total-jobs N`). RUNS rounds, interleaved.
#
#   BEFORE=521f5aa RIVER=/work/wt/bin/river N=200000 RUNS=3 scripts/bench-storage.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-200000}
BASE=${BASE_URL:-postgres://postgres@127.0.0.1:5432}

tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/before" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/workq-after" ./cmd/workq
systems=(after)
if [ -n "${BEFORE:-}" ]; then
  git worktree add -q --detach "$tmp/before" "$BEFORE"
  (cd "$tmp/before" && go build -o "$tmp/workq-before" ./cmd/workq)
  systems+=(before)
fi
[ -n "${RIVER:-}" ] && systems+=(river)

sql() { psql -qAtX "$1" -c "$2"; }
fresh() {
  PGOPTIONS="-c client_min_messages=warning" psql -q "$BASE/postgres" -c "drop database if exists storage_$1" -c "create database storage_$1"
}
# size of a table and its partitions, indexes and TOAST included
size_sql="coalesce(sum(pg_total_relation_size(c.oid)), 0)
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where c.relkind in ('r', 'p') and n.nspname in ('workq', 'public')"

printf '%-7s %4s %10s %12s %12s %12s %12s\n' system run jobs/s "WAL B/job" "work B/job" "done B/job" "archive B/job"
for i in $(seq 1 "$RUNS"); do
  for s in "${systems[@]}"; do
    fresh "$s"
    url="$BASE/storage_$s?sslmode=disable"
    case $s in
      river) "$RIVER" migrate-up --database-url "$url" >/dev/null 2>&1 ;;
      *) DATABASE_URL=$url "$tmp/workq-$s" migrate up >/dev/null ;;
    esac
    sql "$url" "checkpoint"
    lsn0=$(sql "$url" "select pg_current_wal_lsn()")
    case $s in
      river) out=$("$RIVER" bench --database-url "$url" --num-total-jobs "$N" 2>&1 || true)
             rate=$(printf '%s\n' "$out" | sed -nE 's/.*overall job\/sec \[ *([0-9.]+) *\].*/\1/p') ;;
      *) out=$(DATABASE_URL=$url "$tmp/workq-$s" bench -n "$N" 2>/dev/null)
         rate=$(printf '%s\n' "$out" | grep -E ' = [0-9.]+ jobs/s' | sed -E 's/.* = ([0-9.]+) jobs\/s.*/\1/') ;;
    esac
    lsn1=$(sql "$url" "select pg_current_wal_lsn()")
    wal=$(sql "$url" "select pg_wal_lsn_diff('$lsn1', '$lsn0')")
    # what stays: a plain VACUUM (what autovacuum does) gives back a table's
    # empty trailing pages; the rest of its space is kept for reuse
    sql "$url" "vacuum"
    case $s in
      river) work=$(sql "$url" "select $size_sql and c.relname = 'river_job'"); done_=0; arch=0 ;;
      *) work=$(sql "$url" "select $size_sql and c.relname = 'job_runs'")
         done_=$(sql "$url" "select $size_sql and (c.relname = 'job_runs_done' or c.relname like 'job_runs_done_%')")
         arch=$(sql "$url" "select $size_sql and (c.relname = 'runs' or c.relname like 'runs_%')") ;;
    esac
    printf '%-7s %4d %10.0f %12.0f %12.0f %12.0f %12.0f\n' "$s" "$i" "${rate:-0}" \
      "$(awk -v x="$wal" -v n="$N" 'BEGIN {print x / n}')" "$(awk -v x="$work" -v n="$N" 'BEGIN {print x / n}')" \
      "$(awk -v x="$done_" -v n="$N" 'BEGIN {print x / n}')" "$(awk -v x="$arch" -v n="$N" 'BEGIN {print x / n}')"
  done
done
