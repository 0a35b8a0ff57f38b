#!/usr/bin/env bash
# Compares `workq bench` of two builds at default flags, each beside
# ../shared/ceiling in the same run: BEFORE (a commit) and this tree. Each
# build gets a database of its own, fresh for every run (the schema layouts may differ: before
# issue 19 workq lived in public, now in its own schema), migrated by its own
# binary. Per run: ceiling, then the two builds (their order alternating);
# RUNS runs; it prints each
# build's median of paired ratios to the ceiling and their quotient.
#
#   BEFORE=d65dbf7 RUNS=5 scripts/bench-compare.sh
#   BEFORE=d65dbf7 RUNS=5 MODE=continuous scripts/bench-compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BEFORE:?set BEFORE to a commit}"
RUNS=${RUNS:-5}
N=${N:-200000}
MODE=${MODE:-burn-down} # or continuous (30s)
BASE=${BASE_URL:-postgres://postgres@127.0.0.1:5432}
CEILING_DIR=${CEILING_DIR:-../shared/ceiling}

tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/before" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add -q --detach "$tmp/before" "$BEFORE"
(cd "$tmp/before" && go build -o "$tmp/workq-before" ./cmd/workq)
go build -o "$tmp/workq-after" ./cmd/workq
(cd "$CEILING_DIR" && go build -o "$tmp/ceiling" .)

before_url="$BASE/bench_before?sslmode=disable"
after_url="$BASE/bench_after?sslmode=disable"
ceiling_url="$BASE/bench_ceiling?sslmode=disable"
# Every run gets fresh databases: a database reused across runs carries the
# last run's dead tuples (the shared server's autovacuum is off, and the
# bench runs no maintenance), and continuous runs then collapsed to
# 0.3 of the ceiling in either build at random (2026-12-07).
fresh() {
  for db in bench_before bench_after bench_ceiling; do
    PGOPTIONS="-c client_min_messages=warning" psql -q "$BASE/postgres" -c "drop database if exists $db" -c "create database $db"
  done
  DATABASE_URL=$before_url "$tmp/workq-before" migrate up >/dev/null
  DATABASE_URL=$after_url "$tmp/workq-after" migrate up >/dev/null
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
rate_of() { grep -E ' = [0-9.]+ (rows|jobs)/s' | sed -E 's/.* = ([0-9.]+) (rows|jobs)\/s.*/\1/'; }
args=(-n "$N")
[ "$MODE" = continuous ] && args=(--duration 30s)
declare -a c b a rb ra
for i in $(seq 1 "$RUNS"); do
  fresh
  c+=("$("$tmp/ceiling" -url "$ceiling_url" -n "$N" -batch 500 -c 2 2>/dev/null | rate_of)")
  # Alternate which build goes first: the second inherits the first's
  # checkpoint and dirty buffers.
  if [ $((i % 2)) = 1 ]; then
    b+=("$(DATABASE_URL=$before_url "$tmp/workq-before" bench "${args[@]}" 2>/dev/null | rate_of)")
    a+=("$(DATABASE_URL=$after_url "$tmp/workq-after" bench "${args[@]}" 2>/dev/null | rate_of)")
  else
    a+=("$(DATABASE_URL=$after_url "$tmp/workq-after" bench "${args[@]}" 2>/dev/null | rate_of)")
    b+=("$(DATABASE_URL=$before_url "$tmp/workq-before" bench "${args[@]}" 2>/dev/null | rate_of)")
  fi
  rb+=("$(awk -v x="${b[-1]}" -v y="${c[-1]}" 'BEGIN {print x / y}')")
  ra+=("$(awk -v x="${a[-1]}" -v y="${c[-1]}" 'BEGIN {print x / y}')")
  printf 'run %d: ceiling %s; before %s (%.2f); after %s (%.2f)\n' "$i" "${c[-1]}" "${b[-1]}" "${rb[-1]}" "${a[-1]}" "${ra[-1]}" >&2
done
mb=$(printf '%s\n' "${rb[@]}" | median)
ma=$(printf '%s\n' "${ra[@]}" | median)
printf '%s, %d runs: before %s (%s) %.2f of the ceiling, after %.2f; after/before %.3f\n' \
  "$MODE" "$RUNS" "$BEFORE" "$(git rev-parse --short "$BEFORE")" "$mb" "$ma" "$(awk -v x="$ma" -v y="$mb" 'BEGIN {print x / y}')"
