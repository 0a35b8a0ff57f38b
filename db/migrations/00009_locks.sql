-- Named distributed locks with a fencing token: the maintenance leader is
-- one of them, and package lock exposes the mechanism. A lock is a row
-- with an expiry on the database clock; there are no session advisory
-- locks, so it works through PgBouncer transaction pooling. The row is kept
-- after release so that the token only ever grows: every acquisition gets
-- a token greater than any earlier holder's, and a write fenced by a token
-- (a statement that also checks the lock row) is refused once a newer
-- holder exists or the lock expired.

-- +goose Up
create table workq.workq_locks (
    name        workq.workq_name primary key,
    owner       text not null check (length(owner) between 1 and 256),
    token       bigint not null check (token > 0),
    expires_at  timestamptz not null,
    acquired_at timestamptz not null,
    renewed_at  timestamptz not null
);

-- +goose Down
drop table workq.workq_locks;
