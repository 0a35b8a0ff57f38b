package kinds

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// jobRuns is the kind of job runs: jobs of a kind, enqueued by the Client.
var jobRuns = Kind{
	Table:       workqtype.TableJobRuns,
	Name:        "jobs",
	Title:       "Job runs",
	Noun:        "job run",
	RetryWord:   "retry",
	KindLabel:   WordKind,
	ClaimedKind: WordKind,
	HasMetadata: true,
	State:       lease.Status.String,
	States:      []string{"ready", "in_progress", "done", "failed", "cancelled", "pending"},
	// job_runs.metadata holds the enqueuing span's trace context.
	TraceContext: func(it *lease.Item) json.RawMessage { return it.Metadata },
	Page:         pageJobRuns,
	PageAsc:      pageJobRunsAsc,
	Get:          getJobRun,
	Filters:      []string{FilterLimitKey},
}

func pageJobRuns(ctx context.Context, q *gen.Queries, a PageArgs) ([]workqtype.Item, error) {
	rows, err := q.JobRunsPage(ctx, gen.JobRunsPageParams{BeforeID: a.Before, Queue: a.Queue, Status: a.Status, Kind: a.Kind,
		CreatedAfter: a.After, CreatedBefore: a.CreatedBefore, MinID: a.MinID, ErrorText: a.ErrorText, Metadata: a.Metadata, LimitKey: a.LimitKey, MaxRows: a.Max})
	return mapRows(rows, err, jobRunItem)
}

func getJobRun(ctx context.Context, q *gen.Queries, id int64) (workqtype.Item, error) {
	r, err := q.JobRunsGet(ctx, id)
	return jobRunItem(r), err
}

func jobRunItem(r gen.JobRun) workqtype.Item {
	it := workqtype.Item{Table: workqtype.TableJobRuns, ID: r.ID, Queue: r.Queue, Kind: r.Kind, Priority: r.Priority, RunAt: r.RunAt,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, LeaseVersion: r.LeaseVersion, ClaimedAt: r.ClaimedAt,
		ClaimedBy: deref(r.ClaimedBy), LockedUntil: r.LockedUntil, LastError: deref(r.LastError),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Payload: json.RawMessage(r.Payload), Metadata: workqtype.DecodeMetadata(r.Metadata)}
	setStatus(&it, lease.Status(r.Status), lease.Status(r.Status).String())
	detail(&it, "dedup_key", r.DedupKey)
	detail(&it, "limit_key", r.LimitKey)
	if r.UniqueKey != nil {
		detail(&it, "unique_key", ptr(hex.EncodeToString(r.UniqueKey)))
		detail(&it, "unique_states", ptr(uniqueStates(r.UniqueStates)))
	}
	detail(&it, "schedule_id", r.ScheduleID)
	detail(&it, "scheduled_time", r.ScheduledTime)
	detail(&it, "cancel_requested_at", r.CancelRequestedAt)
	// A workflow's task: its workflow, and what its handler recorded
	// (Job.SetOutput, of any job run).
	detail(&it, "workflow_id", r.WorkflowID)
	if len(r.Output) > 0 {
		detail(&it, "output", &r.Output)
	}
	return it
}

// uniqueStates names the statuses of a job_runs.unique_states mask.
func uniqueStates(mask *int16) string {
	var names []string
	for s := lease.Status(0); s < 16; s++ {
		if mask != nil && *mask&(1<<s) != 0 {
			names = append(names, s.String())
		}
	}
	return strings.Join(names, ",")
}

func pageJobRunsAsc(ctx context.Context, q *gen.Queries, a PageArgs) ([]workqtype.Item, error) {
	rows, err := q.JobRunsPageAsc(ctx, gen.JobRunsPageAscParams{AfterID: a.AfterID, Queue: a.Queue, Status: a.Status, Kind: a.Kind,
		CreatedAfter: a.After, CreatedBefore: a.CreatedBefore, MaxID: a.MaxID, ErrorText: a.ErrorText, Metadata: a.Metadata, LimitKey: a.LimitKey, MaxRows: a.Max})
	return mapRows(rows, err, jobRunItem)
}
