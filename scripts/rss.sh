#!/usr/bin/env bash
# Memory of a standalone `workq worker` over a continuous run: a producer
# keeps a backlog of noop jobs while the worker (a separate process) works
# them; the worker's RSS is sampled every 30 s.
#
#   DATABASE_URL=... DURATION=300 scripts/rss.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
DURATION=${DURATION:-300}
WORKER_FLAGS=${WORKER_FLAGS:-"--batch 500 --concurrency 2000"}
go build -o bin/workq ./cmd/workq
bin/workq bench --produce-only --duration "$((DURATION + 20))s" >/tmp/workq-rss-producer.log 2>&1 &
producer=$!
sleep 5
bin/workq worker --queues workq-bench $WORKER_FLAGS --log-level warn &
worker=$!
trap 'kill $worker $producer 2>/dev/null || true' EXIT
for ((t = 0; t <= DURATION; t += 30)); do
  rss=$(awk '/VmRSS/ {print $2}' /proc/$worker/status)
  done=$(psql "$DATABASE_URL" -Atc "select count(*) from job_runs_all where queue = 'workq-bench' and status = 2")
  echo "t=${t}s worker_rss_kb=$rss done=$done"
  [ "$t" -lt "$DURATION" ] && sleep 30
done
kill -TERM $worker; wait $worker || true
