package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/internal/worker"
)

// A worker whose database goes away for several seconds logs one warning
// when it goes and one line when it is back, whatever its loops (claims,
// next-due reads, reclaims, the listener, heartbeats) see meanwhile: the
// database cut silently (a partition: statements time out) and down (a
// stopped server: connections closed and refused).
func TestWorkerLogsAnOutageOnce(t *testing.T) {
	cases := []struct {
		name string
		cut  func(*testutil.Proxy)
	}{
		{"partition", (*testutil.Proxy).Cut},
		{"server down", (*testutil.Proxy).Down},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := testdb.URL(t)
			ctx := context.Background()
			direct, err := pgxpool.New(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			pool, px := testutil.ProxiedPool(t, url)
			rec := &testutil.LogRecorder{}
			cfg := config.Default()
			cfg.Lease = 2 * time.Second // statements time out within 1 s of the cut
			cfg.Poll = 100 * time.Millisecond
			done := make(chan int64, 16)
			w, err := worker.New(pool, cfg.Worker(), worker.Options{Logger: slog.New(rec), OnResult: func(r worker.Result) {
				if r.Applied {
					done <- r.Item.ID
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			w.Register("noop", func(context.Context, *worker.Job) error { return nil })
			rctx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() { errc <- w.Run(rctx) }()
			defer func() {
				px.Restore()
				cancel()
				if err := <-errc; err != nil {
					t.Error(err)
				}
			}()
			q := jobq.New(jobq.Options{})
			wait := func(id int64, within time.Duration) {
				t.Helper()
				deadline := time.After(within)
				for {
					select {
					case got := <-done:
						if got == id {
							return
						}
					case <-deadline:
						t.Fatalf("job %d not done within %s; log:\n%s", id, within, strings.Join(rec.Since(0, slog.LevelDebug), "\n"))
					}
				}
			}
			first, err := q.Enqueue(ctx, direct, jobq.Job{Kind: "noop"})
			if err != nil {
				t.Fatal(err)
			}
			wait(first.ID, 30*time.Second)

			from := rec.Len()
			c.cut(px)
			time.Sleep(6 * time.Second) // below the first reminder (10 s)
			during := rec.Since(from, slog.LevelWarn)
			later, err := q.Enqueue(ctx, direct, jobq.Job{Kind: "noop"})
			if err != nil {
				t.Fatal(err)
			}
			px.Restore()
			wait(later.ID, 60*time.Second)
			// The line saying it is back follows the first call that worked.
			back := "INFO worker: database reachable again after "
			deadline := time.Now().Add(30 * time.Second)
			for !hasPrefix(rec.Since(from, slog.LevelInfo), back) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			all := rec.Since(from, slog.LevelInfo)
			want := []string{"WARN worker: database unreachable; retrying until it answers"}
			if fmt.Sprint(during) != fmt.Sprint(want) {
				t.Errorf("warnings during the cut:\n%s\nwant %q", strings.Join(during, "\n"), want)
			}
			var warns, backs int
			for _, l := range all {
				if strings.HasPrefix(l, "WARN") || strings.HasPrefix(l, "ERROR") {
					warns++
				}
				if strings.HasPrefix(l, back) {
					backs++
				}
			}
			if warns != 1 || backs != 1 {
				t.Errorf("%d warnings and %d lines saying it is back, want 1 and 1:\n%s", warns, backs, strings.Join(all, "\n"))
			}
		})
	}
}

func hasPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
