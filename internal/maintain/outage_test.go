package maintain_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// A maintenance leader whose database goes away for several seconds says
// so once, not once per task round (tasks run every 100 ms here), loses
// its lock saying that once, and says once that the database is back;
// the database cut silently and down.
func TestMaintenanceLogsAnOutageOnce(t *testing.T) {
	cases := []struct {
		name string
		cut  func(*testutil.Proxy)
	}{
		{"partition", (*testutil.Proxy).Cut},
		{"server down", (*testutil.Proxy).Down},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			pool, px := testutil.ProxiedPool(t, testdb.URL(t))
			rec := &testutil.LogRecorder{}
			log := slog.New(rec)
			const ttl = 3 * time.Second
			s := maintain.New(pool, maintain.Options{Owner: "a", LockTTL: ttl, RetryInterval: 100 * time.Millisecond, Logger: log})
			reap, err := maintain.ReapTask(pool, 100*time.Millisecond, 100, log)
			if err != nil {
				t.Fatal(err)
			}
			ping := maintain.Task{Name: "ping", Every: 100 * time.Millisecond, Run: func(ctx context.Context, _ int64) (int64, error) {
				qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				defer cancel()
				_, err := pool.Exec(qctx, "select 1")
				return 0, err
			}}
			for _, task := range []maintain.Task{reap, ping} {
				if err := s.Add(task); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer s.Stop(ctx)
			eventually(t, 10*ttl, "it leads", func() bool { _, ok := s.Leader(); return ok })
			eventually(t, 10*ttl, "its tasks run", func() bool { return s.Stats()[1].Rounds > 3 })

			from := rec.Len()
			c.cut(px)
			time.Sleep(6 * time.Second) // twice the lock's TTL, below the first reminder (10 s)
			px.Restore()
			back := "INFO maintenance: database reachable again after "
			eventually(t, 60*time.Second, "the line saying the database is back", func() bool {
				for _, l := range rec.Since(from, slog.LevelInfo) {
					if strings.HasPrefix(l, back) {
						return true
					}
				}
				return false
			})
			eventually(t, 10*ttl, "it leads again", func() bool { _, ok := s.Leader(); return ok })
			all := rec.Since(from, slog.LevelInfo)
			// Until it is back: one warning that the database is
			// unreachable, and the lock's own lines (the leadership is
			// lost; through a partition, a leadership acquired by a
			// statement sent during the cut is lost again at once), not
			// one line per task round or per acquisition attempt (60 of
			// each in the cut).
			allowed := map[string]int{
				"WARN maintenance: database unreachable; retrying until it answers": 1,
				"WARN lock renewal failed; retrying until the local deadline":       2,
				"WARN lock lost": 2,
			}
			count := map[string]int{}
			backs, outages := 0, 0
			for _, l := range all {
				switch {
				case strings.HasPrefix(l, back):
					backs++
				case strings.HasPrefix(l, "WARN maintenance: database unreachable"):
					outages++
				}
				if backs == 0 && (strings.HasPrefix(l, "WARN") || strings.HasPrefix(l, "ERROR")) {
					count[l]++
				}
			}
			// After it, such a leadership may be lost too: a real event
			// the lock and the service say, not the outage again.
			bad := outages != 1 || backs != 1
			for l, n := range count {
				if n > allowed[l] {
					bad = true
				}
			}
			if bad {
				t.Errorf("want one warning that the database is unreachable, the lock's once each, and one line that it is back; got %v:\n%s",
					fmt.Sprint(count), strings.Join(all, "\n"))
			}
		})
	}
}
