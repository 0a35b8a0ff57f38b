#!/usr/bin/env bash
# Keyed outbox delivery while an unrelated transaction stays open (issue 20):
# holds a transaction that has a transaction id open in another database of
# the same server (HOLD_URL, default its `postgres` database) for HOLD
# seconds, runs `workq bench --table outbox --ordered-keys KEYS -n N` while
# it is open, and reports the bench's rate and whether the run ended while
# the transaction was still open. Before issue 20 keyed delivery waited for
# the transaction to end; now it does not.
#
# Run it on a server of its own: while the transaction is open, every
# relay of an older workq on the server stops delivering keyed messages.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench?sslmode=disable scripts/bench-held-xact.sh
#   HOLD=120 N=200000 KEYS=10000 WORKQ=bin/workq scripts/bench-held-xact.sh
set -euo pipefail
: "${DATABASE_URL:?set DATABASE_URL}"
HOLD=${HOLD:-120}
N=${N:-200000}
KEYS=${KEYS:-10000}
WORKQ=${WORKQ:-bin/workq}
# The same server, database postgres, the same query string.
HOLD_URL=${HOLD_URL:-$(echo "$DATABASE_URL" | sed -E 's#^([a-z]+://[^/]*)/[^?]*#\1/postgres#')}
APP=workq-held-xact-$$

PGAPPNAME=$APP psql "$HOLD_URL" -Xq >/dev/null <<SQL &
begin;
select pg_current_xact_id();
select pg_sleep($HOLD);
commit;
SQL
holder=$!
trap 'kill $holder 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  open=$(psql "$HOLD_URL" -XtAc "select count(*) from pg_stat_activity where application_name = '$APP' and backend_xid is not null")
  [ "$open" = 1 ] && break
  sleep 0.1
done
[ "$open" = 1 ] || { echo "the held transaction did not start" >&2; exit 1; }
xid=$(psql "$HOLD_URL" -XtAc "select backend_xid from pg_stat_activity where application_name = '$APP'")
start=$(date +%s.%N)
out=$("$WORKQ" bench --table outbox -n "$N" --ordered-keys "$KEYS" 2>&1)
end=$(date +%s.%N)
echo "$out" | grep -E '^(inserted|outbox)'
still=$(psql "$HOLD_URL" -XtAc "select count(*) from pg_stat_activity where application_name = '$APP' and backend_xid is not null")
printf 'transaction %s held open in another database for %ss: the run took %.1f s and ended with it %s\n' \
  "$xid" "$HOLD" "$(echo "$end - $start" | bc)" "$([ "$still" = 1 ] && echo 'still open' || echo 'already ended')"
