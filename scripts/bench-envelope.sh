#!/usr/bin/env bash
# Reproduces "The measured envelope" of docs/throughput.md: in every round,
# the raw SQL ceiling's burn-down, then workq at its defaults and with one
# setting changed at a time (--batch, --concurrency) in burn-down,
# continuous and paced (pickup latency) mode; the outbox relay's burn-down;
# inbox receive by batch size; and the burn-down of one against two
# standalone `workq worker` processes. Prints every measurement as a TSV line
# (round, case, jobs/s, ratio to the round's ceiling, p50/p95/p99 ms), then
# per case the median, the range and the median of the paired ratios.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench?sslmode=disable scripts/bench-envelope.sh
#   RUNS=3 N=200000 DURATION=15s RATE=1000 scripts/bench-envelope.sh
#
# It deletes the rows of queue workq-bench and vacuums: use a scratch database.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
RUNS=${RUNS:-3}
N=${N:-200000}
DURATION=${DURATION:-15s}
RATE=${RATE:-1000}      # paced mode: jobs/s, enqueued in batches of 10 (EnqueueMany)
LATDUR=${LATDUR:-10s}
CEILING_DIR=${CEILING_DIR:-../shared/ceiling}

go build -o bin/workq ./cmd/workq
(cd "$CEILING_DIR" && go build -o "$OLDPWD/bin/ceiling" .)

# Settings compared with the defaults (batch 1000, concurrency 100).
configs=("defaults|" "batch 100|--batch 100" "batch 5000|--batch 5000" "concurrency 10|--concurrency 10" "concurrency 1000|--concurrency 1000")

declare -a workers=()
stop_workers() {
  for p in "${workers[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${workers[@]}"; do wait "$p" 2>/dev/null || true; done
  workers=()
}
trap stop_workers EXIT

psqlq() { psql "$DATABASE_URL" -XAtqc "$1"; }

# procs P: burn-down of N noop jobs by P standalone `workq worker` processes
# at their defaults; the rate is N over the span from the first claim to the
# last completion, read from the run archive.
procs() {
  local p=$1
  psqlq "delete from job_runs where queue = 'workq-bench'; delete from runs where work_table = 'job_runs' and queue = 'workq-bench'" >/dev/null
  psqlq "vacuum analyze job_runs" >/dev/null; psqlq "vacuum analyze runs" >/dev/null
  psqlq "insert into job_runs (queue, kind) select 'workq-bench', 'noop' from generate_series(1, $N)" >/dev/null
  psqlq "vacuum analyze job_runs" >/dev/null
  for _ in $(seq 1 "$p"); do
    bin/workq worker --jobs --queues workq-bench --log-level warn &
    workers+=("$!")
  done
  local deadline=$((SECONDS + 300))
  until [ "$(psqlq "select exists (select 1 from job_runs where queue = 'workq-bench' and status = 0) or exists (select 1 from job_runs where queue = 'workq-bench' and status = 1)")" = f ]; do
    [ $SECONDS -lt $deadline ] || { echo "procs $p: not done after 300 s" >&2; exit 1; }
    sleep 0.5
  done
  stop_workers
  psqlq "select round(count(*) / extract(epoch from max(finished_at) - min(started_at))) from runs where work_table = 'job_runs' and queue = 'workq-bench' and outcome = 'done'"
}

raw=$(mktemp)
emit() { # emit ROUND CASE RATE [P50 P95 P99]
  local ratio; ratio=$(awk -v a="$3" -v c="$ceiling" 'BEGIN {printf "%.2f", a / c}')
  printf '%s\t%s\t%.0f\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$ratio" "${4:--}" "${5:--}" "${6:--}" | tee -a "$raw" >&2
}
bench() { bin/workq bench "$@" --json 2>/dev/null; }

for i in $(seq 1 "$RUNS"); do
  ceiling=$(bin/ceiling -url "$DATABASE_URL" -n "$N" -batch 500 -c 2 2>/dev/null | sed -nE 's/.* = ([0-9.]+) rows\/s.*/\1/p')
  emit "$i" "ceiling burn-down" "$ceiling"
  for cf in "${configs[@]}"; do
    name=${cf%%|*} flags=${cf#*|}
    emit "$i" "job_runs burn-down, $name" "$(bench -n "$N" $flags | jq .jobs_per_sec)"
    emit "$i" "job_runs continuous, $name" "$(bench --duration "$DURATION" $flags | jq .jobs_per_sec)"
    read -r r p50 p95 p99 < <(bench --duration "$LATDUR" --rate "$RATE" --enqueue-batch 10 $flags |
      jq -r '[.jobs_per_sec, .latency_p50_ms, .latency_p95_ms, .latency_p99_ms] | @tsv')
    emit "$i" "job_runs latency at $RATE/s, $name" "$r" "$p50" "$p95" "$p99"
  done
  read -r r p50 p95 p99 < <(bench --duration "$LATDUR" --rate 100 | jq -r '[.jobs_per_sec, .latency_p50_ms, .latency_p95_ms, .latency_p99_ms] | @tsv')
  emit "$i" "job_runs latency at 100/s one by one, defaults" "$r" "$p50" "$p95" "$p99"
  for cf in "defaults|" "batch 100|--batch 100" "concurrency 1000|--concurrency 1000"; do
    name=${cf%%|*} flags=${cf#*|}
    emit "$i" "outbox burn-down, $name" "$(bench --table outbox -n "$N" $flags | jq .jobs_per_sec)"
  done
  for rb in 100 1000; do
    emit "$i" "inbox receive, batches of $rb" "$(bin/workq bench --receive -n "$((N / 2))" --receive-batch "$rb" 2>/dev/null |
      sed -nE 's/^inbox receive: .* = ([0-9.]+) rows\/s.*/\1/p')"
  done
  for p in 1 2; do
    emit "$i" "job_runs burn-down, $p worker process(es)" "$(procs "$p")"
  done
done

echo
printf '%-52s %-22s %-20s %s\n' case "jobs/s median (range)" "paired ratio median" "latency p50/p95/p99 ms (medians)"
awk -F'\t' '
  { if (!($2 in seen)) { order[++n] = $2; seen[$2] = 1 }
    v[$2] = v[$2] " " $3; r[$2] = r[$2] " " $4; a[$2] = a[$2] " " $5; b[$2] = b[$2] " " $6; c[$2] = c[$2] " " $7 }
  function med(s,   x, k, i, j, t) {
    k = split(s, x, " "); if (x[1] == "-") return "-"
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (x[j] + 0 < x[i] + 0) { t = x[i]; x[i] = x[j]; x[j] = t }
    return (k % 2) ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2 }
  function rng(s,   x, k, i, lo, hi) {
    k = split(s, x, " "); lo = hi = x[1] + 0
    for (i = 2; i <= k; i++) { if (x[i] + 0 < lo) lo = x[i] + 0; if (x[i] + 0 > hi) hi = x[i] + 0 }
    return lo "-" hi }
  END { for (i = 1; i <= n; i++) { k = order[i]
    lat = (med(a[k]) == "-") ? "" : sprintf("%.2f / %.2f / %.2f", med(a[k]), med(b[k]), med(c[k]))
    printf "%-52s %-22s %-20s %s\n", k, sprintf("%.0f (%s)", med(v[k]), rng(v[k])), sprintf("%.2f", med(r[k])), lat } }
' "$raw"
rm -f "$raw"
