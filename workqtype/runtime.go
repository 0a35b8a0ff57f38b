package workqtype

import (
	"errors"
	"time"
)

// ErrLeaseLost means the caller no longer holds the lease on an item: it
// expired and was reaped or reclaimed, or another owner holds it now. It
// is the cause (context.Cause) of a handler context cancelled for that
// reason; the handler's result is then discarded.
var ErrLeaseLost = errors.New("lease lost")

// ErrCancelled is the cause (context.Cause) of a handler context
// cancelled because its item was cancelled while it ran; the attempt ends
// cancelled whatever the handler returns. A handler may also return an
// error wrapping ErrCancelled to cancel its own item (no retry).
var ErrCancelled = errors.New("job cancelled")

// ErrShutdown is the cause (context.Cause) of a handler context cancelled
// because its Client is stopping and the drain timeout passed (or Stop's
// context ended): the item is released, back to ready, not counted as a
// failed attempt.
var ErrShutdown = errors.New("worker shutting down")

// StopBound is how long a Client's Stop may take beyond its drain timeout:
// cancelled handlers get a moment to return, then the last completions and
// releases are flushed. When the database cannot be reached within it, or
// a handler ignores its context, Stop returns anyway; the leases left
// behind expire and their items run again.
const StopBound = 5 * time.Second

// ErrSchemaBehind is returned when the database's workq schema is older
// than the migrations this code carries (never migrated: version 0).
var ErrSchemaBehind = errors.New("database schema is not current")

// Stats counts what a Client's workers did since they started.
//
// An attempt's outcome is counted once its completion statement has
// returned, so the database shows it (the row done, the run archived) a
// moment before Stats counts it: until then it is Pending. A result
// callback runs after the count, so Stats read after a result is reported
// includes it.
type Stats struct {
	Claimed         int64 `json:"claimed"`
	Done            int64 `json:"done"`
	Retried         int64 `json:"retried"`
	Failed          int64 `json:"failed"`
	Snoozed         int64 `json:"snoozed"`
	Released        int64 `json:"released"`
	Cancelled       int64 `json:"cancelled"`       // attempts that ended cancelled
	CancelRequests  int64 `json:"cancel_requests"` // running handlers cancelled because their item was cancelled
	LeaseLost       int64 `json:"lease_lost"`
	Panics          int64 `json:"panics"`
	ClaimErrors     int64 `json:"claim_errors"`
	ClaimsReleased  int64 `json:"claims_released"`  // rows of claims whose result was lost, released by token
	HeartbeatErrors int64 `json:"heartbeat_errors"` // failed heartbeat statements
	FlushErrors     int64 `json:"flush_errors"`     // failed completion statements (each is retried)
	Unflushed       int64 `json:"unflushed"`        // completions given up on: their leases expire and the reaper retries them
	InFlight        int64 `json:"in_flight"`        // attempts holding a handler slot
	Pending         int64 `json:"pending"`          // finished attempts whose completion is not flushed yet
}

// Add returns the field-by-field sum of s and o (the counters of several
// workers, such as the shards of a sharded Client).
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Claimed: s.Claimed + o.Claimed, Done: s.Done + o.Done, Retried: s.Retried + o.Retried, Failed: s.Failed + o.Failed,
		Snoozed: s.Snoozed + o.Snoozed, Released: s.Released + o.Released, Cancelled: s.Cancelled + o.Cancelled,
		CancelRequests: s.CancelRequests + o.CancelRequests, LeaseLost: s.LeaseLost + o.LeaseLost,
		Panics: s.Panics + o.Panics, ClaimErrors: s.ClaimErrors + o.ClaimErrors, ClaimsReleased: s.ClaimsReleased + o.ClaimsReleased,
		HeartbeatErrors: s.HeartbeatErrors + o.HeartbeatErrors, FlushErrors: s.FlushErrors + o.FlushErrors,
		Unflushed: s.Unflushed + o.Unflushed, InFlight: s.InFlight + o.InFlight, Pending: s.Pending + o.Pending,
	}
}
