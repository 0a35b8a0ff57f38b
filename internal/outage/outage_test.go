package outage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/workq/workq/internal/outage"
	"github.com/workq/workq/internal/testutil"
)

// An outage of 16m40s with a failure every second logs one warning,
// reminders when it has lasted 10 s, 20 s, 40 s... then every 5 minutes,
// and one line when it is over; a second outage starts over.
func TestOutageLogSchedule(t *testing.T) {
	rec := &testutil.LogRecorder{}
	l := outage.New(slog.New(rec), "worker")
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l.SetClock(func() time.Time { return now })
	down := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	l.OK() // up: nothing
	for range 1000 {
		if !l.Failed(down) {
			t.Fatal("a refused connection is not taken as the database being unreachable")
		}
		now = now.Add(time.Second)
	}
	l.OK()
	l.OK()
	want := []string{
		"WARN worker: database unreachable; retrying until it answers",
		"WARN worker: database still unreachable after 10s",
		"WARN worker: database still unreachable after 20s",
		"WARN worker: database still unreachable after 40s",
		"WARN worker: database still unreachable after 1m20s",
		"WARN worker: database still unreachable after 2m40s",
		"WARN worker: database still unreachable after 5m20s",
		"WARN worker: database still unreachable after 10m20s", // then every 5 minutes
		"WARN worker: database still unreachable after 15m20s",
		"INFO worker: database reachable again after 16m40s",
	}
	if got := rec.Since(0, slog.LevelInfo); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lines:\n%q\nwant\n%q", got, want)
	}
	if l.Down() {
		t.Fatal("down after OK")
	}
	l.Failed(down)
	if got := rec.Since(0, slog.LevelInfo); got[len(got)-1] != want[0] || !l.Down() {
		t.Fatalf("a second outage: %q", got[len(got)-1])
	}
	// A call that worked just after the first failure was under way when
	// the outage began (seen: another loop's answer reported 2 ms after):
	// the outage goes on until a call works after Settle.
	n := rec.Len()
	now = now.Add(2 * time.Millisecond)
	l.OK()
	if !l.Down() || len(rec.Since(n, slog.LevelInfo)) != 0 {
		t.Fatalf("an OK 2ms into the outage ended it: %q", rec.Since(n, slog.LevelInfo))
	}
	now = now.Add(outage.Settle)
	l.OK()
	if got := rec.Since(n, slog.LevelInfo); l.Down() || len(got) != 1 || got[0] != "INFO worker: database reachable again after 1s" {
		t.Fatalf("an OK after Settle: down %v, %q", l.Down(), got)
	}
}

func TestUnreachable(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connect", &pgconn.ConnectError{Config: &pgconn.Config{}}, true},
		{"net", fmt.Errorf("claim: %w", &net.OpError{Op: "read", Err: errors.New("reset")}), true},
		{"eof", fmt.Errorf("claim job_runs: %w", io.ErrUnexpectedEOF), true},
		{"conn closed", fmt.Errorf("x: %w", pgconn.ErrConnClosed), true},
		{"deadline", fmt.Errorf("heartbeat: %w", context.DeadlineExceeded), true},
		{"cancelled", context.Canceled, false},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"undefined table", fmt.Errorf("reap: %w", &pgconn.PgError{Code: "42P01"}), false},
		{"other", errors.New("boom"), false},
	}
	for _, c := range cases {
		if got := outage.Unreachable(c.err); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// An error the Log does not take is the caller's to log.
	rec := &testutil.LogRecorder{}
	l := outage.New(slog.New(rec), "maintenance")
	if l.Failed(errors.New("boom")) || l.Down() || len(rec.Since(0, slog.LevelDebug)) != 0 {
		t.Fatal("a non-connection error was taken")
	}
}
