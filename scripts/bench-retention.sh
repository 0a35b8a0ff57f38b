#!/usr/bin/env bash
# bench-retention.sh: the run archive's retention, before and after it was
# partitioned (migration 00020), on a throwaway cluster with
# production-like settings and autovacuum on (the settings of
# bench-sustained.sh), and the upgrade itself. docs/throughput.md
# ("Partitioned run archive: retention at 10,000,000 runs") has the figures.
#
#   scripts/bench-retention.sh                   # 10,000,000 runs, 1,000,000 for the upgrade
#   ROWS=1000000 UPGRADE_ROWS=200000 scripts/bench-retention.sh   # a quick look
#
# Three databases on one cluster, one after the other:
#
#   before   the schema at version 18 (main before partitioning, applied
#            from `workq migrate sql --to 18`), ROWS archived runs spread
#            evenly over the 8 whole UTC days before today; retention removes
#            the oldest day (ROWS/8) with main's RunsDeleteFinished statement,
#            1000 rows per statement, each in its own transaction (what the
#            retention task does), then a VACUUM of runs (which the DELETEs
#            leave to autovacuum: 1/8 of the rows dead is under its default
#            threshold of 20%, so it would not come before the second day).
#   after    the latest schema (`workq migrate up`), the day partitions of
#            those 8 days made as maintenance would have, the same rows;
#            retention drops the oldest day's partition
#            (workq_runs_drop_partition, what the retention task calls).
#   upgrade  version 18 with UPGRADE_ROWS runs, then `workq migrate up`
#            (00019 and 00020) while completions go on.
#   ins      archive inserts at full speed, batches of 100 rows, into the
#            plain table and into the partitioned one (what tuple routing
#            costs a completion), alternated twice.
#
# For each: wall time, WAL written (pg_current_wal_lsn before and after),
# the archive's size (every partition's table and indexes) and dead tuples
# after, and the latency of archive inserts made meanwhile by pgbench at
# RATE per second (a completion's insert into runs; the worst one says how
# long retention or the upgrade held them up). Output in OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-10000000}
UPGRADE_ROWS=${UPGRADE_ROWS:-1000000}
RATE=${RATE:-200}
PORT=${PORT:-5498}
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
OUT=${OUT:-/tmp/retention-$(date +%H%M%S)}
SHARED_BUFFERS=${SHARED_BUFFERS:-4GB}
mkdir -p "$OUT"
go build -o bin/workq ./cmd/workq

. scripts/prodlike-cluster.sh
prodlike_start retention-pg <<CONF
log_lock_waits = on
deadlock_timeout = 1ms
log_line_prefix = '%m [%p] %a '
CONF
stop_cluster() { prodlike_stop "$OUT/server.log"; }
trap stop_cluster EXIT

url() { echo "postgres://postgres@127.0.0.1:$PORT/$1?sslmode=disable"; }
q() { local db=$1; shift; PGOPTIONS='-c client_min_messages=warning' psql "$(url "$db")" -XAtq -F $'\t' -v ON_ERROR_STOP=1 "$@"; }
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
now_ms() { date +%s%3N; }
# timed DB SQL...: runs each statement in one session with psql's \timing;
# prints the statements' output, then "ms<TAB>total" (server round trips,
# without psql's start and connection).
timed() {
  local db=$1; shift
  local args=(-c '\timing on'); for s in "$@"; do args+=(-c "$s"); done
  q "$db" "${args[@]}" | awk '/^Time: / { t += $2; next } NF { print } END { printf "ms\t%.1f\n", t }'
}
ms_of() { awk -F '\t' '$1 == "ms" { print $2 }'; }
out_of() { grep -v '^ms	' || true; }

# The archive's size over all its partitions (a plain table is its own
# tree), its dead tuples, and its rows by PostgreSQL's statistics.
stats() { # DB -> "size_bytes<TAB>dead<TAB>live"
  q "$1" -c "select pg_stat_force_next_flush()" >/dev/null 2>&1 || true
  sleep 2 # the statistics of the other sessions reach shared memory within a second
  q "$1" -c "with t as (select relid from pg_partition_tree('workq.runs') union select 'workq.runs'::regclass)
             select sum(pg_total_relation_size(t.relid)), coalesce(sum(s.n_dead_tup), 0), coalesce(sum(s.n_live_tup), 0)
             from t left join pg_stat_user_tables s on s.relid = t.relid"
}
wal() { q "$1" -c "select pg_current_wal_lsn()"; }
wal_diff() { q "$1" -c "select pg_wal_lsn_diff('$3', '$2')::bigint"; }
mb() { awk -v b="$1" 'BEGIN { if (b < 1048576) printf "%.0f kB", b / 1024; else printf "%.0f MB", b / 1048576 }'; }
# Lock waits: with log_lock_waits and deadlock_timeout 1ms the server logs
# every lock wait longer than 1 ms, and how long it took once acquired.
# mark; ...; lock_waits: the longest wait logged since mark, and how many.
mark() { LOGMARK=$(wc -l <"$DATA/server.log"); }
lock_waits() {
  tail -n +"$((LOGMARK + 1))" "$DATA/server.log" | sed -n 's/.* acquired \([A-Za-z]*\) on relation .* after \([0-9.]*\) ms.*/\1 \2/p' \
    | sort -k2 -n | awk '{ n++; m = $2; l = $1 } END { if (n == 0) print "no lock wait over 1 ms"; else printf "%d lock waits over 1 ms, the longest %.1f ms (%s)\n", n, m, l }'
}

# fill DB N: N archived runs evenly over the 8 whole UTC days before today,
# in item id order (run ids and times grow together, as completions write
# them). The 8 days are whole so that the oldest holds exactly N/8.
fill() {
  q "$1" -c "insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
    select workq.workq_run_id('job_runs', i, 1), 'job_runs', i, 'default', 1, 1, md5(i::text)::uuid, 'host-4242',
           t - interval '40 milliseconds', t, case when i % 50 = 0 then 'retry' else 'done' end,
           case when i % 50 = 0 then 'handler: temporary failure' end
    from generate_series(1, $2) i,
         lateral (select date_trunc('day', now(), 'UTC') - interval '8 days' + (i - 1) * (interval '8 days' / $2) as t) f"
  q "$1" -c "vacuum analyze workq.runs" -c "checkpoint"
}

# A completion's insert into runs, for pgbench (an item id from a sequence:
# unique run ids).
cat >"$OUT/complete.sql" <<'SQL'
insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome)
select workq.workq_run_id('job_runs', s.n, 1), 'job_runs', s.n, 'bench', 1, 1, gen_random_uuid(), 'pgbench', now(), now(), 'done'
from (select nextval('public.bench_item') as n) s;
SQL

# completions DB NAME: start pgbench inserting at RATE/s; stop_completions
# ends it and prints the insert latency: count, p50, p99, max (ms).
completions() {
  q "$1" -c "create sequence if not exists public.bench_item start 2000000000000"
  rm -f "$OUT/lat-$2".*
  (cd "$OUT" && exec pgbench -n -c 4 -j 2 -R "$RATE" -T 3600 -f complete.sql -l --log-prefix="lat-$2" "$(url "$1")" >"$OUT/$2.pgbench" 2>&1) &
  PGB=$!
  sleep 3 # warm up
}
stop_completions() {
  sleep 3 # pgbench writes its log in 4 kB blocks: let the blocks of the measured time out
  # TERM: a background job of a script ignores INT. Called in $(...), so
  # the pid is not a child to wait for: poll.
  kill -TERM "$PGB" 2>/dev/null || true
  while kill -0 "$PGB" 2>/dev/null; do sleep 0.1; done
  # -l lines: client transaction latency_us script epoch us lag_us; the
  # latency counts from the scheduled start (-R), so a wait shows in full.
  # A line cut by the kill has fewer fields.
  cat "$OUT/lat-$1".* 2>/dev/null | awk 'NF == 7 { print $3 / 1000 }' | sort -n | awk '
    { v[NR] = $1 } END { if (NR == 0) { print "no inserts logged"; exit }
      printf "%d inserts, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", NR, v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1], v[NR] }'
}

new_db() { q postgres -c "create database $1"; }

say "bench-retention: $ROWS runs over 8 days, $UPGRADE_ROWS for the upgrade, completions at $RATE/s; $(nproc) cores; $("$PGBIN/postgres" --version)"

# --- before: main's batched DELETE ----------------------------------------
new_db before
# The inserts' latency with nothing else going on, for comparison.
bin/workq migrate sql --to 18 | q before >/dev/null
completions before baseline
sleep 10
say "baseline: inserts with nothing else running: $(stop_completions baseline)"
q postgres -c "drop database before with (force)" -c "create database before"
bin/workq migrate sql --to 18 | q before >/dev/null
t=$(now_ms); fill before "$ROWS"; say "before: filled $ROWS runs in $(( ($(now_ms) - t) / 1000 )) s"
# RunsDeleteFinished as main has it (db/queries/runs.sql), with the cut-off
# fixed at the start of the oldest day's end instead of now() - age, so that
# it removes that day exactly; one statement per transaction.
q before -c "create procedure public.delete_oldest_day(p_before timestamptz, p_batch integer, inout p_total bigint default 0, inout p_statements integer default 0)
language plpgsql as \$\$
declare n bigint;
begin
    loop
        delete from workq.runs
        where run_id = any(array(
            select r.run_id from workq.runs r
            where r.finished_at < p_before
            order by r.finished_at
            limit p_batch));
        get diagnostics n = row_count;
        commit;
        p_total := p_total + n;
        p_statements := p_statements + 1;
        exit when n < p_batch;
    end loop;
end \$\$"
read -r size0 dead0 live0 < <(stats before)
completions before before-delete
mark; lsn0=$(wal before)
out=$(timed before "call public.delete_oldest_day(date_trunc('day', now(), 'UTC') - interval '7 days', 1000)")
res=$(echo "$out" | out_of); dt=$(echo "$out" | ms_of); lsn1=$(wal before)
lat=$(stop_completions before-delete)
read -r size1 dead1 live1 < <(stats before)
say "before: DELETE of the oldest day: $(echo "$res" | cut -f1) rows in $(echo "$res" | cut -f2) statements, $dt ms, WAL $(mb "$(wal_diff before "$lsn0" "$lsn1")")"
say "before:   archive $(mb "$size0") -> $(mb "$size1"), dead tuples $dead0 -> $dead1, live $live0 -> $live1"
say "before:   inserts meanwhile: $lat; $(lock_waits)"
completions before before-vacuum
mark; lsn0=$(wal before)
dt=$(timed before "vacuum workq.runs" | ms_of); lsn1=$(wal before)
lat=$(stop_completions before-vacuum)
read -r size2 dead2 live2 < <(stats before)
say "before: VACUUM after it: $dt ms, WAL $(mb "$(wal_diff before "$lsn0" "$lsn1")"), archive $(mb "$size2"), dead tuples $dead2"
say "before:   inserts meanwhile: $lat; $(lock_waits)"
q postgres -c "drop database before with (force)"

# --- after: dropping the oldest partition ----------------------------------
new_db after
bin/workq migrate up --database-url "$(url after)" >/dev/null
# The day partitions a running installation would have: the 8 days.
q after -c "select workq.workq_runs_add_partitions(now() - interval '8 days', 8, null)" >/dev/null
t=$(now_ms); fill after "$ROWS"; say "after: filled $ROWS runs in $(( ($(now_ms) - t) / 1000 )) s"
q after -c "select partition_name, rows_estimate from workq.workq_runs_partition_list()" >"$OUT/after-partitions.tsv"
read -r size0 dead0 live0 < <(stats after)
completions after after-drop
mark; lsn0=$(wal after)
# In an explicit transaction, timed statement by statement: ACCESS
# EXCLUSIVE on runs is held from the drop to the commit, which releases it
# before it unlinks the files.
out=$(q after -c '\timing on' -c "begin" -c "select dropped, rows_estimate from workq.workq_runs_drop_partition(date_trunc('day', now(), 'UTC') - interval '7 days')" -c "commit")
res=$(echo "$out" | grep -v '^Time: ' | grep -v '^$' | head -1)
read -r t_begin t_drop t_commit < <(echo "$out" | awk '/^Time: / { printf "%s ", $2 } END { print "" }')
dt=$(awk -v a="$t_drop" -v b="$t_commit" 'BEGIN { printf "%.1f", a + b }'); lsn1=$(wal after)
lat=$(stop_completions after-drop)
read -r size1 dead1 live1 < <(stats after)
say "after: DROP of the oldest day's partition $(echo "$res" | cut -f1) (~$(echo "$res" | cut -f2) rows): $dt ms (drop $t_drop ms, commit $t_commit ms), WAL $(mb "$(wal_diff after "$lsn0" "$lsn1")")"
say "after:   archive $(mb "$size0") -> $(mb "$size1"), dead tuples $dead0 -> $dead1, live $live0 -> $live1"
say "after:   inserts meanwhile: $lat; $(lock_waits)"
# A whole retention round as the task runs it (partitions ahead, drop, the
# DEFAULT partition's old rows), with nothing left to drop.
dt=$(timed after "select workq.workq_runs_add_partitions(now(), 3, now() - interval '7 days')" \
  "select count(*) from workq.workq_runs_drop_partition(now() - interval '7 days')" \
  "select workq.workq_runs_delete_old(now() - interval '7 days', 1000)" | ms_of)
say "after: a retention round with nothing to do: $dt ms"
q postgres -c "drop database after with (force)"

# --- upgrade: 00019 and 00020 on a filled archive, completions going on -----
new_db upgrade
bin/workq migrate sql --to 18 | q upgrade >/dev/null
fill upgrade "$UPGRADE_ROWS"
read -r size0 dead0 live0 < <(stats upgrade)
completions upgrade upgrade
mark; lsn0=$(wal upgrade); t=$(now_ms)
# Every statement's duration goes to the server log.
bin/workq migrate up --database-url "$(url upgrade)&log_min_duration_statement=0&application_name=bench-migrate" >/dev/null
dt=$(( $(now_ms) - t )); lsn1=$(wal upgrade)
lat=$(stop_completions upgrade)
n=$(q upgrade -c "select count(*) from workq.runs where queue <> 'bench'")
say "upgrade: migrate up (00019, 00020) of $UPGRADE_ROWS runs ($(mb "$size0")): $dt ms, WAL $(mb "$(wal_diff upgrade "$lsn0" "$lsn1")"); $n of them kept"
say "upgrade:   inserts meanwhile: $lat; $(lock_waits)"
q upgrade -c "select partition_name, lower_bound, upper_bound, rows_estimate from workq.workq_runs_partition_list()" | sed 's/^/upgrade:   partition /' | tee -a "$OUT/summary.txt"
# The migrations' statements (execute or simple-protocol statement lines,
# from 00019's first on), the DO blocks numbered as 00020's comments number
# them.
grep -a ' bench-migrate LOG:  duration: ' "$DATA/server.log" | grep -av ' \(parse\|bind\) ' \
  | sed -n 's/.*duration: \([0-9.]* ms\) *[a-z]*[^:]*: *\(.*\)/\1\t\2/p' \
  | awk -F '\t' '/runs_run_id_finished_next/ { on = 1 } on && !/workq_migrations/ {
      if ($2 ~ /^do \$\$/) { n++; $2 = (n == 1 ? "00019: swap the index in" : "00020 DO block " n - 1) }
      printf "%s\t%s\n", $1, substr($2, 1, 110) }' >"$OUT/upgrade-statements.tsv" || true
sed 's/^/upgrade:   /' "$OUT/upgrade-statements.tsv" | tee -a "$OUT/summary.txt"
q postgres -c "drop database upgrade with (force)"
# --- inserts: what routing through the partitions costs a completion --------
# A completion archives its batch's attempts in one INSERT; here batches of
# 100 rows from two clients at full speed for INSERT_SECONDS, into an empty
# archive of each layout, each in a fresh database, alternated twice.
cat >"$OUT/batch.sql" <<'SQL'
insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome)
select workq.workq_run_id('job_runs', n, 1), 'job_runs', n, 'bench', 1, 1, gen_random_uuid(), 'pgbench', now(), now(), 'done'
from (select nextval('public.bench_item') as n from generate_series(1, 100)) s;
SQL
INSERT_SECONDS=${INSERT_SECONDS:-20}
for round in 1 2; do
  for layout in plain partitioned; do
    new_db ins
    if [ $layout = plain ]; then bin/workq migrate sql --to 18 | q ins >/dev/null
    else bin/workq migrate up --database-url "$(url ins)" >/dev/null; fi
    q ins -c "create sequence public.bench_item start 2000000000000" -c "checkpoint"
    tps=$(pgbench -n -c 2 -j 2 -T "$INSERT_SECONDS" -f "$OUT/batch.sql" "$(url ins)" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    say "inserts ($layout, round $round): $(awk -v t="$tps" 'BEGIN { printf "%.0f rows/s", t * 100 }') in batches of 100 from 2 clients"
    q postgres -c "drop database ins with (force)"
  done
done
say "output in $OUT"
