-- Statements that end outbox join members lock the members' joins in join id
-- order, before the counting trigger (00004) runs, so two of them never
-- deadlock on the join rows.
--
-- The counting trigger (outbox_join_count) is an AFTER row trigger: its
-- events fire at the end of the statement, one per ended member, in the
-- order the statement's plan visited the rows (by id, by the batch's order,
-- or by a hash table's), and each locks its member's join row until commit.
-- Two workers whose batches end members of the same joins therefore locked
-- those joins in whatever orders their batches and plans gave, and
-- deadlocked when the orders crossed: PostgreSQL aborted one statement after
-- deadlock_timeout (1 s by default), and its worker retried the whole batch.
-- Sorting the batch in Go does not fix it (the plan decides the visit
-- order), and sorting the rows inside the UPDATE cannot be written.
--
-- workq_lock_joins(table, ids) takes those locks itself, in join id order
-- (FOR NO KEY UPDATE, the lock the trigger's UPDATE takes). The shared lease
-- statements that end or revive items (LeaseComplete, LeaseReapExpired,
-- LeaseRevive, LeaseCancel in db/queries/lease.sql) call it after their
-- UPDATE (so every such statement takes its item rows first, its join rows
-- second, the latter in one global order) and before their triggers fire
-- (at the statement's end), which then find their join rows already locked.
-- For every other table it returns at once: only the outbox has joins.
-- Nothing about counting changes; the trigger stays as it is, and any other
-- statement that ends members is still counted, only without the order.

-- +goose Up
-- +goose StatementBegin
create function workq.workq_lock_joins(p_table text, p_ids bigint[])
returns integer
language plpgsql volatile
as $$
declare
    v_n integer;
begin
    if p_table <> 'outbox' or coalesce(cardinality(p_ids), 0) = 0 then
        return 0;
    end if;
    -- join_id never changes (outbox_join_fixed), so any version of the
    -- rows gives it; rows outside joins give null, which matches no join.
    -- The rows are read by primary key: no "join_id is not null" here, which
    -- would let stale statistics (no members yet) pick the partial index
    -- outbox_join and read every member in flight. The lock rows node above
    -- the sort locks in join id order.
    select count(*) into v_n from (
        select j.id from workq.outbox_joins j
        where j.id = any(array(select m.join_id from workq.outbox m where m.id = any(p_ids)))
        order by j.id
        for no key update of j
    ) l;
    return v_n;
end
$$;
-- +goose StatementEnd

-- +goose Down
drop function workq.workq_lock_joins(text, bigint[]);
