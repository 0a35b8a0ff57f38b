package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	workqdb "github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// Queue is one (table, queue): its counts by state, how long its oldest due
// item has waited, its pause and limit W, and its claim and completion
// rates over the last minute. A queue is listed when it has items, a pause
// or a limit.
type Queue struct {
	Table      lease.Table `json:"table"`
	Queue      string      `json:"queue"`
	Ready      int64       `json:"ready"`       // ready and due
	Scheduled  int64       `json:"scheduled"`   // ready, due later
	InProgress int64       `json:"in_progress"` // including Expired
	Expired    int64       `json:"expired"`     // in progress with an expired lease, not yet reaped
	Done       int64       `json:"done"`
	Failed     int64       `json:"failed"`
	Cancelled  int64       `json:"cancelled"`
	Pending    int64       `json:"pending"` // a workflow's tasks waiting for their dependencies
	// OldestReadyAge is how long the oldest due ready item has waited, on
	// the database clock (0: none is waiting).
	OldestReadyAge Duration `json:"oldest_ready_age"`
	// ClaimsPerSecond and CompletionsPerSecond are averages over the last
	// minute: attempts started (ended or still running) and attempts ended
	// (by a worker, or expired by the reaper). Claims above completions for
	// long means a backlog of work in flight; completions below the rate of
	// new ready items means the queue falls behind.
	ClaimsPerSecond      float64    `json:"claims_per_second"`
	CompletionsPerSecond float64    `json:"completions_per_second"`
	Paused               bool       `json:"paused"`
	PausedAt             *time.Time `json:"paused_at,omitempty"`
	PausedBy             string     `json:"paused_by,omitempty"`
	PauseReason          string     `json:"pause_reason,omitempty"`
	Limit                *int32     `json:"limit"` // W; null: no limit
}

// Add adds o's counts and rates to q, and keeps the older of their oldest
// ready ages: the sum of one queue's rows over several shards. The pause
// and the limit are each shard's own and are left alone.
func (q *Queue) Add(o Queue) {
	q.Ready += o.Ready
	q.Scheduled += o.Scheduled
	q.InProgress += o.InProgress
	q.Expired += o.Expired
	q.Done += o.Done
	q.Failed += o.Failed
	q.Cancelled += o.Cancelled
	q.Pending += o.Pending
	q.OldestReadyAge = max(q.OldestReadyAge, o.OldestReadyAge)
	q.ClaimsPerSecond += o.ClaimsPerSecond
	q.CompletionsPerSecond += o.CompletionsPerSecond
}

// Duration is a time.Duration that reads and writes as seconds in JSON.
type Duration time.Duration

// MarshalJSON writes d as seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", time.Duration(d).Seconds())), nil
}

// UnmarshalJSON reads seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration in seconds: %w", err)
	}
	*d = Duration(s * float64(time.Second))
	return nil
}

// Queues lists every (table, queue) with its counts, pause, limit and
// rates, sorted by table and queue. It counts every table in full (one
// statement per table) and reads one minute of the run archive: an
// operator's command, not something to run on every metrics scrape. On a
// database whose schema is older than this binary it returns an error
// wrapping db.ErrSchemaBehind that says to migrate, not a missing column.
func Queues(ctx context.Context, db workqtype.DB) ([]Queue, error) {
	if err := workqdb.CheckSchema(ctx, db); err != nil {
		return nil, err
	}
	rows := map[string]*Queue{}
	row := func(t lease.Table, q string) *Queue {
		k := string(t) + "\x00" + q
		if rows[k] == nil {
			rows[k] = &Queue{Table: t, Queue: q}
		}
		return rows[k]
	}
	for _, t := range lease.Tables {
		st, err := lease.New(db, t).QueueStats(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range st {
			r := row(t, s.Queue)
			r.Ready, r.Scheduled, r.InProgress, r.Expired = s.Ready, s.Scheduled, s.InProgress, s.Expired
			r.Done, r.Failed, r.Cancelled, r.OldestReadyAge = s.Done, s.Failed, s.Cancelled, Duration(s.OldestReadyAge)
			r.Pending = s.Pending
			r.ClaimsPerSecond = float64(s.ClaimedRecently) / 60
		}
	}
	q := gen.New(db)
	recent, err := q.RunsLastMinute(ctx)
	if err != nil {
		return nil, fmt.Errorf("rates: %w", err)
	}
	for _, r := range recent {
		qr := row(lease.Table(r.WorkTable), r.Queue)
		qr.ClaimsPerSecond += float64(r.Started) / 60
		qr.CompletionsPerSecond = float64(r.Ended) / 60
	}
	paused, err := lease.Paused(ctx, db)
	if err != nil {
		return nil, err
	}
	for _, p := range paused {
		r := row(p.Table, p.Queue)
		at := p.PausedAt
		r.Paused, r.PausedAt, r.PausedBy, r.PauseReason = true, &at, p.PausedBy, p.Reason
	}
	limits, err := q.QueueLimitsList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", err)
	}
	for _, l := range limits {
		w := l.MaxInProgress
		row(lease.Table(l.WorkTable), l.Queue).Limit = &w
	}
	return sortedRows(rows, func(q Queue) (lease.Table, string) { return q.Table, q.Queue }), nil
}

// sortedRows returns the rows of a map keyed by (table, queue), sorted by
// table and queue.
func sortedRows[K comparable, R any](rows map[K]*R, key func(R) (lease.Table, string)) []R {
	out := make([]R, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		ti, qi := key(out[i])
		tj, qj := key(out[j])
		if ti != tj {
			return ti < tj
		}
		return qi < qj
	})
	return out
}
