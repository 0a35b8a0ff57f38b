-- The inbox's duplicate path is read-only (docs/inbox.md, "Decisions"): a
-- repeat of a known (source, message_id) is answered from the unique index
-- and never writes or locks the stored row, so a redelivery storm costs no
-- WAL and a duplicate received inside a long caller transaction can never
-- hold up the worker's heartbeat or completion of that row. The delivery
-- counters that only such a write could keep (last_seen_at, seen_count) go.

-- +goose Up
alter table workq.inbox drop column last_seen_at, drop column seen_count;

-- +goose Down
alter table workq.inbox
    add column last_seen_at timestamptz not null default now(),
    add column seen_count integer not null default 1;
