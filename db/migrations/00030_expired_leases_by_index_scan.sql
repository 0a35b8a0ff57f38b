-- The reap's candidates are read by an ordered index scan (issue 32;
-- docs/design.md §4.3).
--
-- LeaseReapExpired looks for expired leases in <T>_in_progress (id) where
-- status = 1. That index keeps an entry for every row a claim took until
-- VACUUM removes it, the rows long completed included. PostgreSQL planned
-- the reap as a bitmap heap scan of the index and a sort: a bitmap scan
-- visits the heap page of every entry, dead or not, on every call, and
-- never marks an entry dead. At 30,000 jobs/s that was up to 150 ms for a
-- reap that found nothing, once a second per claiming queue, about 4% of
-- the server's CPU in a continuous benchmark (docs/throughput.md). An
-- ordered index scan marks the entries of rows dead to every transaction
-- as it passes (killed index tuples), so the next reap steps over them
-- without reading the heap: 76 ms, then 13 ms, at the same point.
--
-- The planner cannot be told which scan to use inside one statement, so
-- the candidates come from this function, whose own settings rule out the
-- bitmap scan and the sequential scan (the table's statistics can be far
-- behind a table that grows between vacuums). It plans its query on each
-- call (dynamic SQL: a fraction of a millisecond, once a second per
-- queue) for the work table named, locks the rows for the calling
-- statement as before (for no key update skip locked), and returns their
-- owner tokens by id, {"id": "token", ...}, which the statement's archive
-- step read from its own aggregate before.
--
-- +goose Up
-- +goose StatementBegin
-- The query, apart: test/plan_test.go plans it under the settings below.
create function workq.workq_expired_leases_query(p_table text)
returns text
language sql immutable parallel safe
as $q$
select format(
    'select coalesce(jsonb_object_agg(e.id, e.owner_token), ''{}'') from (
         select x.id, x.owner_token from workq.%I x
         where x.status = 1 and x.locked_until <= now()
           and (x.locked_until > pg_postmaster_start_time() or now() >= pg_postmaster_start_time() + interval ''10 seconds'')
           and ($1::text is null or x.queue = $1::text)
         order by x.id
         limit $2
         for no key update skip locked) e',
    p_table)
$q$;
-- +goose StatementEnd
-- +goose StatementBegin
create function workq.workq_expired_leases(p_table text, p_queue text, p_max integer)
returns jsonb
language plpgsql volatile
set enable_bitmapscan = off
set enable_seqscan = off
as $$
declare
    v_by_id jsonb;
begin
    execute workq.workq_expired_leases_query(p_table) into v_by_id using p_queue, p_max;
    return v_by_id;
end
$$;
-- +goose StatementEnd

-- +goose Down
drop function workq.workq_expired_leases(text, text, integer);
drop function workq.workq_expired_leases_query(text);
