package jobq_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// FuzzEnqueue: the Go validation and the database agree. A job Validate
// accepts is stored exactly as given (a constraint the Go side does not
// know about would fail here); a job it rejects gets an error wrapping
// ErrInvalid from Enqueue too, and nothing is written. The seed corpus runs
// in every `go test`; `make fuzz` runs the fuzzer against the real database.
func FuzzEnqueue(f *testing.F) {
	seeds := []struct {
		queue, kind, payload, dedup string
		priority                    int16
		maxAttempts                 int
		delayMs                     int64
	}{
		{"default", "email.send", `{"to":"a@example.com"}`, "", 0, 0, 0},
		{"", "k", `{}`, "order-42", 5, 3, 1000},
		{"q'; drop table job_runs; --", "k", `{}`, "", 0, 0, 0},
		{"q", "k\x00", `{}`, "", 0, 0, 0},
		{"q", "k", `[1]`, "", 0, 0, 0},
		{"q", "k", `{"a":1}garbage`, "", 0, 0, 0},
		{"q", "k", `{"s":"\u0000"}`, "", 0, 0, 0},
		{"q", "k", `{}`, "", -32768, 1001, -5},
		{"q", "", `{}`, "", 0, 0, 0},
		{"ümlaut", "k", `{}`, "", 0, 0, 0},
		{"q", "k", `{}`, "\xff", 0, 0, 0},
	}
	for _, s := range seeds {
		f.Add(s.queue, s.kind, s.payload, s.dedup, s.priority, s.maxAttempts, s.delayMs)
	}
	pool := testdb.Pool(f)
	client := jobq.New(jobq.Options{})
	ctx := context.Background()
	count := func(t *testing.T) int64 {
		var n int64
		if err := pool.QueryRow(ctx, "select count(*) from workq.job_runs_all").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	f.Fuzz(func(t *testing.T, queue, kind, payload, dedup string, priority int16, maxAttempts int, delayMs int64) {
		j := jobq.Job{Queue: queue, Kind: kind, Payload: json.RawMessage(payload), DedupKey: dedup,
			Priority: priority, MaxAttempts: maxAttempts, Delay: time.Duration(delayMs) * time.Millisecond}
		before := count(t)
		verr := client.Validate(j)
		got, err := client.Enqueue(ctx, pool, j)
		if verr != nil {
			if !errors.Is(verr, workqtype.ErrInvalid) || !errors.Is(err, workqtype.ErrInvalid) {
				t.Fatalf("rejected job %+v: Validate %v, Enqueue %v: want both to wrap ErrInvalid", j, verr, err)
			}
			if after := count(t); after != before {
				t.Fatalf("a rejected job wrote %d rows", after-before)
			}
			return
		}
		if err != nil {
			t.Fatalf("Validate accepted %+v but Enqueue failed: %v", j, err)
		}
		var gotQueue, gotKind string
		var gotPriority int16
		var gotDedup *string
		if err := pool.QueryRow(ctx, "select queue, kind, priority, dedup_key from workq.job_runs_all where id = $1", got.ID).
			Scan(&gotQueue, &gotKind, &gotPriority, &gotDedup); err != nil {
			t.Fatal(err)
		}
		wantQueue := queue
		if wantQueue == "" {
			wantQueue = "default"
		}
		if gotQueue != wantQueue || gotKind != kind || gotPriority != priority || (dedup != "" && (gotDedup == nil || *gotDedup != dedup)) {
			t.Fatalf("stored (%q, %q, %d, %v), enqueued %+v", gotQueue, gotKind, gotPriority, gotDedup, j)
		}
		// Leave no live dedup key behind for the next input.
		if _, err := pool.Exec(ctx, "delete from workq.job_runs where id = $1", got.ID); err != nil {
			t.Fatal(err)
		}
	})
}
