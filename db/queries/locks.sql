-- name: LocksAcquire :one
-- LocksAcquire takes the named lock for owner when it is free or expired (on the database clock at the moment the row is examined), with a fencing token one greater than the last holder's; no row means another owner holds it.
insert into workq.workq_locks as l (name, owner, token, expires_at, acquired_at, renewed_at)
values (@name, @owner, greatest(1, (select workq.workq_epoch())), clock_timestamp() + (@ttl_ms::bigint) * interval '1 millisecond', clock_timestamp(), clock_timestamp())
on conflict (name) do update
    set owner = excluded.owner, token = greatest(l.token + 1, (select workq.workq_epoch())), expires_at = excluded.expires_at,
        acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at
    where l.expires_at <= clock_timestamp()
returning token, expires_at;

-- name: LocksRenew :one
-- LocksRenew extends the lock held under token; no row means the lock is lost (expired, or taken by a newer token): an expired lock is never revived.
update workq.workq_locks
set expires_at = clock_timestamp() + (@ttl_ms::bigint) * interval '1 millisecond', renewed_at = clock_timestamp()
where name = @name and token = @token and expires_at > clock_timestamp()
returning expires_at;

-- name: LocksAdvance :one
-- LocksAdvance moves the token of the lock held under token up to min_token (greater than token), fenced by the old token: no row means the lock is no longer held under it (expired, or taken by a newer token), and nothing changed. Only the holder advances; the next acquisition still gets a greater token.
update workq.workq_locks
set token = @min_token::bigint
where name = @name and token = @token and expires_at > clock_timestamp() and @min_token::bigint > token
returning token;

-- name: LocksRelease :execrows
-- LocksRelease ends the lock held under token at once (the row and its token stay, so the next token is greater).
update workq.workq_locks set expires_at = clock_timestamp()
where name = @name and token = @token and expires_at > clock_timestamp();

-- name: LocksHeld :one
-- LocksHeld reports whether token still holds the named lock; a fenced write puts the same condition in its own statement.
select exists (
    select 1 from workq.workq_locks where name = @name and token = @token and expires_at > clock_timestamp()
)::boolean as held;

-- name: LocksList :many
-- LocksList lists every lock with its holder, token and whether it is held now.
select name, owner, token, expires_at, acquired_at, renewed_at, (expires_at > clock_timestamp())::boolean as held
from workq.workq_locks order by name;
