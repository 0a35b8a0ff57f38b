-- An operator can put a failed item back to ready (outbox retry, inbox
-- revive, and the operations API's retry). The action is kept in the run
-- archive as an attempt-like row with outcome 'revived': who did it, when,
-- the attempt count it reset and why. It takes its own lease_version (the
-- item's version is bumped by one), so it has a run id of its own and the
-- next claim's run id follows it.

-- +goose Up
alter table workq.runs drop constraint runs_outcome_check;
alter table workq.runs add constraint runs_outcome_check
    check (outcome in ('done', 'retry', 'failed', 'released', 'snoozed', 'expired', 'revived'));

-- +goose Down
delete from workq.runs where outcome = 'revived';
alter table workq.runs drop constraint runs_outcome_check;
alter table workq.runs add constraint runs_outcome_check
    check (outcome in ('done', 'retry', 'failed', 'released', 'snoozed', 'expired'));
