package inboxrt

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// DeleteBatch is how many rows one statement of DeleteProcessed deletes at
// most: short statements keep locks and WAL bursts small beside the
// workers.
const DeleteBatch = 1000

// DeleteProcessed ends the de-duplication window: it deletes processed
// (done) messages that finished more than olderThan ago, at most max of
// them, in statements of DeleteBatch rows by primary key, and returns how
// many it deleted. A repeat of a deleted message is received as new. Dead
// (failed) messages are never deleted here: they stay until an operator
// revives or deletes them. olderThan and max must be positive (an error
// wrapping workqtype.ErrInvalid otherwise).
func DeleteProcessed(ctx context.Context, db workqtype.DB, olderThan time.Duration, max int64) (int64, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("inbox: delete processed: %w: the window must be positive, got %s", workqtype.ErrInvalid, olderThan)
	}
	if max <= 0 {
		return 0, fmt.Errorf("inbox: delete processed: %w: max must be positive, got %d", workqtype.ErrInvalid, max)
	}
	olderMs := int64(math.Ceil(float64(olderThan) / float64(time.Millisecond)))
	q := gen.New(db)
	var total int64
	for total < max {
		want := min(max-total, DeleteBatch)
		n, err := q.InboxDeleteProcessed(ctx, olderMs, int32(want))
		if err != nil {
			return total, fmt.Errorf("inbox: delete processed: %w", err)
		}
		total += n
		if n < want {
			break
		}
	}
	return total, nil
}

// StatusName names an inbox status the way the inbox reads it: ready,
// processing, processed, dead or cancelled.
func StatusName(s lease.Status) string {
	switch s {
	case lease.StatusReady:
		return "ready"
	case lease.StatusInProgress:
		return "processing"
	case lease.StatusDone:
		return "processed"
	case lease.StatusFailed:
		return "dead"
	}
	return s.String()
}

// ParseStatus reads a status by its inbox name (ready, processing,
// processed, dead, cancelled) or its lease name (in_progress, done, failed).
func ParseStatus(s string) (lease.Status, error) {
	switch s {
	case "ready":
		return lease.StatusReady, nil
	case "processing", "in_progress":
		return lease.StatusInProgress, nil
	case "processed", "done":
		return lease.StatusDone, nil
	case "dead", "failed":
		return lease.StatusFailed, nil
	case "cancelled":
		return lease.StatusCancelled, nil
	}
	return 0, fmt.Errorf("%w: status %q is not one of ready, processing, processed, dead, cancelled", workqtype.ErrInvalid, s)
}
