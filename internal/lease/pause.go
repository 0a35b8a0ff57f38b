package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/workqtype"
)

// ErrInvalid (workqtype.ErrInvalid, shared by every package) wraps the errors of a bad pause or resume request (unknown
// table, bad queue name, missing actor, reason too long): nothing was
// written.
var ErrInvalid = workqtype.ErrInvalid

// PausedQueue is a paused (table, queue).
type PausedQueue struct {
	Table    Table     `json:"table"`
	Queue    string    `json:"queue"`
	PausedAt time.Time `json:"paused_at"`
	PausedBy string    `json:"paused_by"`
	Reason   string    `json:"reason,omitempty"`
}

func checkQueue(op string, table Table, queue string) error {
	if _, err := lookup(table); err != nil {
		return fmt.Errorf("%s: %w", op, workqtype.InvalidErr("table", err))
	}
	if err := workqtype.CheckQueue("queue", queue); err != nil {
		return fmt.Errorf("%s %s: %w", op, table, err)
	}
	return nil
}

// Pause stops every worker of every process from claiming items of (table,
// queue) until Resume: the claim's budget (workq_claim_budget) is zero for a
// paused queue. Items in flight finish; heartbeats, completions and the
// reaper go on. It reports whether the queue was running; pausing a paused
// queue changes nothing (the first pause's time, actor and reason stay).
// The queue's limit W, if any, is kept. A claim statement already running
// when the pause commits may still take items (it checked before); every
// claim that starts after the pause commits takes none.
func Pause(ctx context.Context, db workqtype.DB, table Table, queue, by, reason string) (bool, error) {
	if err := checkQueue("pause", table, queue); err != nil {
		return false, err
	}
	if err := CheckPauser(by, reason); err != nil {
		return false, fmt.Errorf("pause %s/%s: %w", table, queue, err)
	}
	var r *string
	if reason != "" {
		r = &reason
	}
	_, err := gen.New(db).QueuePausesPause(ctx, gen.QueuePausesPauseParams{WorkTable: string(table), Queue: queue, PausedBy: by, Reason: r})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pause %s/%s: %w", table, queue, err)
	}
	return true, nil
}

// Resume lets workers claim from (table, queue) again and reports whether
// it was paused. Workers pick the queue up at their next claim: a NOTIFY,
// or within one poll interval.
func Resume(ctx context.Context, db workqtype.DB, table Table, queue string) (bool, error) {
	if err := checkQueue("resume", table, queue); err != nil {
		return false, err
	}
	n, err := gen.New(db).QueuePausesResume(ctx, string(table), queue)
	if err != nil {
		return false, fmt.Errorf("resume %s/%s: %w", table, queue, err)
	}
	return n > 0, nil
}

// Paused lists the paused queues.
func Paused(ctx context.Context, db workqtype.DB) ([]PausedQueue, error) {
	rows, err := gen.New(db).QueuePausesList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	out := make([]PausedQueue, len(rows))
	for i, r := range rows {
		out[i] = PausedQueue{Table: Table(r.WorkTable), Queue: r.Queue, PausedAt: r.PausedAt, PausedBy: r.PausedBy, Reason: deref(r.Reason)}
	}
	return out, nil
}

// CheckPauser reports what Pause would reject about who pauses and why (an
// error wrapping ErrInvalid), without touching a database: a Client checks
// it once before it pauses a queue on every shard.
func CheckPauser(by, reason string) error {
	if strings.TrimSpace(by) == "" || len(by) > 256 || !workqtype.ValidText(by) {
		return workqtype.Invalid("by", "who pauses must be 1 to 256 characters of UTF-8 without NUL")
	}
	if len(reason) > 1024 || !workqtype.ValidText(reason) {
		return workqtype.Invalid("reason", "reason must be at most 1024 bytes of UTF-8 without NUL")
	}
	return nil
}
