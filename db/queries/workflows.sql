-- name: WorkflowCreate :one
-- WorkflowCreate writes a workflow's row, running, counting the tasks its transaction writes with it (no WorkflowAttach: no task of a new workflow can have ended, and nobody sees it before it commits).
insert into workq.workflows (name, metadata, tasks)
values (@name::text, sqlc.narg('metadata')::jsonb, @tasks::integer)
returning id, created_at;

-- name: WorkflowInsertTasks :many
-- WorkflowInsertTasks writes a workflow's tasks as job runs, in input order, each with its status (pending -1, or ready 0); metadatas and limit_keys hold '' for none. It sends no NOTIFY: WorkflowNotify does, once the tasks are attached.
insert into workq.job_runs (queue, kind, payload, priority, run_at, max_attempts, metadata, limit_key, workflow_id, status)
select unnest(@queues::text[]), unnest(@kinds::text[]), unnest(@payloads::text[])::jsonb,
       unnest(@priorities::smallint[]), now() + unnest(@delays_ms::bigint[]) * interval '1 millisecond',
       unnest(@max_attempts::integer[]), nullif(unnest(@metadatas::text[]), '')::jsonb, nullif(unnest(@limit_keys::text[]), ''),
       @workflow_id::bigint, unnest(@statuses::smallint[])
returning id;

-- name: WorkflowInsertTaskRows :exec
-- WorkflowInsertTaskRows writes the tasks' names and dependency counts (deps_left starts at the count; WorkflowAttach subtracts the dependencies that have already ended). A name the workflow already has violates workflow_tasks_name.
insert into workq.workflow_tasks (job_id, workflow_id, name, deps, deps_left)
select unnest(@job_ids::bigint[]), @workflow_id::bigint, unnest(@names::text[]), unnest(@deps::integer[]), unnest(@deps::integer[]);

-- name: WorkflowInsertDepIDs :exec
-- WorkflowInsertDepIDs writes edges between tasks whose job run ids the caller knows (those of one call).
insert into workq.workflow_deps (dep_id, task_id, workflow_id, any_outcome)
select unnest(@dep_ids::bigint[]), unnest(@task_ids::bigint[]), @workflow_id::bigint, unnest(@any_outcome::boolean[]);

-- name: WorkflowInsertDeps :one
-- WorkflowInsertDeps writes the edges, each naming its dependency by task name within the workflow (a task of this call or an earlier one), and returns how many it wrote: fewer than given means a name the workflow does not have.
with e as (
    select unnest(@task_ids::bigint[]) as task_id, unnest(@dep_names::text[]) as dep_name, unnest(@any_outcome::boolean[]) as any_outcome
),
ins as (
    insert into workq.workflow_deps (dep_id, task_id, workflow_id, any_outcome)
    select t.job_id, e.task_id, @workflow_id::bigint, e.any_outcome
    from e join workq.workflow_tasks t on t.workflow_id = @workflow_id::bigint and t.name = e.dep_name
    returning 1
)
select count(*)::bigint as n from ins;

-- name: WorkflowAttach :one
-- WorkflowAttach counts the tasks in their workflow and releases or cancels the pending ones whose dependencies have already ended (workq_workflow_attach); WQW01 for a workflow that does not exist, WQW02 for one that has ended.
select workq.workq_workflow_attach(@workflow_id::bigint, @job_ids::bigint[])::integer as n;

-- name: WorkflowNotify :exec
-- WorkflowNotify wakes the workers of the queues of a workflow's new ready tasks (delivered at commit).
select pg_notify('workq_job_runs', q.queue) from (select distinct unnest(@queues::text[]) as queue) q;

-- name: WorkflowGet :one
-- WorkflowGet reads one workflow.
select id, name, status, tasks, done, failed, cancelled, metadata, cancel_requested_at, created_at, finished_at
from workq.workflows where id = @id::bigint;

-- name: WorkflowList :many
-- WorkflowList lists workflows newest first, below before_id (0: from the newest), of one status or (null) all, and whose name starts with name_prefix ('' for all).
select id, name, status, tasks, done, failed, cancelled, metadata, cancel_requested_at, created_at, finished_at
from workq.workflows
where (@before_id::bigint = 0 or id < @before_id::bigint)
  and (sqlc.narg('status')::smallint is null or status = sqlc.narg('status')::smallint)
  and (@name_prefix::text = '' or starts_with(name, @name_prefix::text))
order by id desc
limit @max_rows::integer;

-- name: WorkflowTasks :many
-- WorkflowTasks lists a workflow's tasks in id order, each with its job's state, its dependencies by name (with the any-outcome ones apart) and its output.
select t.job_id, t.name, j.kind, j.queue, j.status, j.attempts, j.max_attempts, j.last_error, j.output, j.created_at, j.finished_at,
       j.run_at, t.deps_left, t.deps_failed,
       coalesce(array(select k.name from workq.workflow_deps d join workq.workflow_tasks k on k.job_id = d.dep_id
                      where d.task_id = t.job_id and not d.any_outcome order by k.name), '{}')::text[] as depends_on,
       coalesce(array(select k.name from workq.workflow_deps d join workq.workflow_tasks k on k.job_id = d.dep_id
                      where d.task_id = t.job_id and d.any_outcome order by k.name), '{}')::text[] as depends_on_any_outcome
from workq.workflow_tasks t join workq.job_runs j on j.id = t.job_id
where t.workflow_id = @workflow_id::bigint
order by t.job_id;

-- name: WorkflowTaskOutput :one
-- WorkflowTaskOutput reads the state and output of the task named name in a workflow.
select j.id, j.status, j.output
from workq.workflow_tasks t join workq.job_runs j on j.id = t.job_id
where t.workflow_id = @workflow_id::bigint and t.name = @name::text;

-- name: WorkflowOfJob :one
-- WorkflowOfJob reads the workflow and task name of a job run (no row: the job does not exist; null workflow: it is in none). A job that ended done and moved to job_runs_done is in none: a workflow's tasks never move.
select j.workflow_id, coalesce(t.name, '')::text as task
from workq.job_runs j left join workq.workflow_tasks t on t.job_id = j.id
where j.id = @id::bigint
union all
(select null::bigint, ''::text from workq.job_runs_done d where d.id = @id::bigint limit 1)
limit 1;

-- name: WorkflowDepCounts :one
-- WorkflowDepCounts counts how the dependencies of a task ended: done, failed, cancelled (a batch's callback reads it).
select count(*) filter (where j.status = 2)::bigint as done,
       count(*) filter (where j.status = 3)::bigint as failed,
       count(*) filter (where j.status = 4)::bigint as cancelled,
       count(*)::bigint as total
from workq.workflow_deps d join workq.job_runs j on j.id = d.dep_id
where d.task_id = @task_id::bigint;

-- name: WorkflowUnfinished :many
-- WorkflowUnfinished lists a workflow's tasks that have not ended and whose cancel was not requested yet, for LeaseCancel.
select j.id from workq.workflow_tasks t join workq.job_runs j on j.id = t.job_id
where t.workflow_id = @workflow_id::bigint and j.status < 2 and j.cancel_requested_at is null
order by j.id;

-- name: WorkflowRequestCancel :one
-- WorkflowRequestCancel marks a running workflow cancelled: it ends cancelled once its tasks have ended, and takes no more tasks. It returns whether it was running (no row: no such workflow). Call it after cancelling the tasks (LeaseCancel locks their rows, then the workflow's: the same order as a completion).
-- A workflow that the cancel of its tasks has just ended, in this
-- transaction (finished_at = now(), the transaction's start), ends
-- cancelled rather than failed.
with w as (
    update workq.workflows set cancel_requested_at = coalesce(cancel_requested_at, now()),
        status = case when status <> 0 then 4 else status end
    where id = @id::bigint and (status = 0 or finished_at = now())
    returning id
)
select (exists (select 1 from w))::boolean as running from workq.workflows x where x.id = @id::bigint;

-- name: WorkflowRetryIDs :many
-- WorkflowRetryIDs lists a workflow's failed tasks and those cancelled other than by a failed dependency, for LeaseRevive (the dependents a failure cancelled come back pending when it is revived).
select j.id from workq.job_runs j join workq.workflow_tasks t on t.job_id = j.id
where t.workflow_id = @workflow_id::bigint and j.status in (3, 4) and not t.dep_cancelled
order by j.id;

-- name: WorkflowClearCancel :exec
-- WorkflowClearCancel clears a workflow's cancel request (a retry runs it again).
update workq.workflows set cancel_requested_at = null where id = @id::bigint and cancel_requested_at is not null;

-- name: WorkflowDeleteFinished :execrows
-- WorkflowDeleteFinished deletes up to max_rows workflows that ended more than older_than_ms ago, with their tasks (job runs, whose outputs are columns of them), names and edges (retention). A workflow's tasks are never deleted before it has ended: LeaseDeleteFinished leaves them to this.
with w as (
    select f.id from workq.workflows f
    where f.status <> 0 and f.finished_at < now() - (@older_than_ms::bigint) * interval '1 millisecond'
    order by f.finished_at
    limit @max_rows::integer
    for update skip locked
),
deps as (
    delete from workq.workflow_deps d
    where d.task_id = any(array(select t.job_id from workq.workflow_tasks t where t.workflow_id = any(array(select w.id from w))))
),
names as (
    delete from workq.workflow_tasks t where t.workflow_id = any(array(select w.id from w))
),
jobs as (
    delete from workq.job_runs j
    where j.id = any(array(select t.job_id from workq.workflow_tasks t where t.workflow_id = any(array(select w.id from w))))
)
delete from workq.workflows x where x.id = any(array(select w.id from w));

-- name: WorkflowAwait :one
-- WorkflowAwait marks a job run as awaited, so that its end notifies '<schema>_done' with 'j<id>' (Client.Wait), and returns its state and output as they are; no row: no such job.
update workq.job_runs set awaited = true
where id = @id::bigint
returning status, output, last_error;

-- name: WorkflowAwaitDone :one
-- WorkflowAwaitDone reads the end of a job run that moved to job_runs_done (WorkflowAwait found no row in job_runs: it ended done, or there is no such job); no row: no such job.
select d.status, d.output, d.last_error from workq.job_runs_done d where d.id = @id::bigint limit 1;
