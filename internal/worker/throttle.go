package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/lease"
)

// throttleError is a handler's result saying that the service downstream
// is overloaded (Throttle).
type throttleError struct {
	d     time.Duration
	cause error
}

func (e *throttleError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("throttled for %s: %v", e.d, e.cause)
	}
	return fmt.Sprintf("throttled for %s", e.d)
}

func (e *throttleError) Unwrap() error { return e.cause }

// Throttle is a handler's result when the service it calls is overloaded
// (it answered 429 or 503, say, and retryAfter is its Retry-After): the
// item runs again after retryAfter without using an attempt, and no
// worker of any process starts another item of its limit key (job runs
// with one) or else of its queue until then; after that the scope starts
// at an adapted rate that grows back step by step (docs/concepts.md,
// "Flow control"). cause, optional, is kept in the run archive.
func Throttle(retryAfter time.Duration, cause error) error {
	return &throttleError{d: max(retryAfter, 0), cause: cause}
}

// ThrottleDuration returns the retry-after of an error made by Throttle
// (ok false for any other error).
func ThrottleDuration(err error) (d time.Duration, ok bool) {
	if err == nil { // before errors.As's target, which it moves to the heap: an allocation per job done
		return 0, false
	}
	var t *throttleError
	if errors.As(err, &t) {
		return t.d, true
	}
	return 0, false
}

// throttle records a throttled attempt's scope in the database, so that
// every process holds it back: the item's limit key, else its queue. A
// failure is logged: the attempt still ends snoozed.
func (p *producer) throttle(ctx context.Context, it lease.Item, d time.Duration) {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.w.cfg.Lease/2)
	defer cancel()
	if _, err := lease.Throttle(tctx, p.w.db, p.src.Table, p.queue, "", it.LimitKey, d); err != nil {
		p.w.log.Warn("throttle not recorded; the item still waits", "table", p.src.Table, "queue", p.queue, "id", it.ID, "err", err)
	}
}
