package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/api"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/testdb"
)

// BenchmarkPages times each dashboard page server-side (the handler, its
// statements and the template, no network) against a scratch database of
// 1,000,000 job runs that is mostly history: 950,000 done, 30,000 failed
// (a third of them with "smtp timeout" in last_error), 20,000 ready over
// four queues, and 1,000,000 archived attempts over the last hour. The
// fill takes a minute or so; run it with
//
//	go test -run '^$' -bench Pages -benchtime 20x ./api/ui/
//
// docs/dashboard.md has the figures.
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	pool := testdb.Pool(b)
	start := time.Now()
	fillMillion(b, ctx, pool)
	b.Logf("filled 1,000,000 job runs and their archive in %s", time.Since(start).Round(time.Second))

	secret, entry, err := api.NewToken("bench", api.ScopeAdmin)
	if err != nil {
		b.Fatal(err)
	}
	tokens, err := api.ParseTokens([]string{entry})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := api.New(siteClient(b, siteSetup{pool: pool}), api.Options{Tokens: tokens, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SampleInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	// Two sampling rounds: the first reads the depth, the second counts the
	// attempts that ended since.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go srv.RunSampler(sctx)

	// Log in through the handler.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {secret}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	srv.ServeHTTP(rec, req)
	cookie := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookie) == 0 {
		b.Fatalf("login: %d", rec.Code)
	}

	var mid, failedID int64
	if err := pool.QueryRow(ctx, `select (select id from workq.job_runs order by id offset 500000 limit 1), (select max(id) from workq.job_runs where status = 3)`).
		Scan(&mid, &failedID); err != nil {
		b.Fatal(err)
	}
	// Wait for the sampler's first round (the overview shows it).
	deadline := time.Now().Add(time.Minute)
	for {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/ui/api/overview", nil)
		req.AddCookie(cookie[0])
		srv.ServeHTTP(rec, req)
		if strings.Contains(rec.Body.String(), `"queue":"q3"`) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no sample within a minute: %s", rec.Body.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	id := strconv.FormatInt(failedID, 10)
	pages := []struct{ name, path string }{
		{"overview", "/ui/"},
		{"overview.json", "/ui/api/overview"},
		{"history.json", "/ui/api/history"},
		{"items newest", "/ui/items/job_runs"},
		{"items one queue", "/ui/items/job_runs?queue=q2"},
		{"items failed", "/ui/items/job_runs?status=failed"},
		{"items ready of a queue", "/ui/items/job_runs?queue=q1&status=ready"},
		{"items kind", "/ui/items/job_runs?kind=report.build"},
		{"items deep page", "/ui/items/job_runs?cursor=" + strconv.FormatInt(mid, 10)},
		{"items created range", "/ui/items/job_runs?created_after=2020-01-01T00:00&created_before=2100-01-01T00:00"},
		{"items error text", "/ui/items/job_runs?error=smtp"},
		{"items failed error text", "/ui/items/job_runs?status=failed&error=smtp"},
		{"item detail", "/ui/items/job_runs/" + id},
		{"outbox keys and joins", "/ui/outbox"},
		{"schedules", "/ui/schedules"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", p.path, nil)
				req.AddCookie(cookie[0])
				srv.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, rec.Code, rec.Body.String())
				}
			}
		})
	}
	// The sampler's round, every interval (10s by default), in the background.
	b.Run("sampler round", func(b *testing.B) {
		for b.Loop() {
			now, err := admin.Clock(ctx, pool)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := admin.Depths(ctx, pool); err != nil {
				b.Fatal(err)
			}
			if _, err := admin.EndedBetween(ctx, pool, now.Add(-10*time.Second), now); err != nil {
				b.Fatal(err)
			}
		}
	})
	// For comparison: the exact counts, which read every row.
	b.Run("exact counts (full scan)", func(b *testing.B) {
		for b.Loop() {
			if _, err := admin.Queues(ctx, pool); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func fillMillion(b *testing.B, ctx context.Context, pool *pgxpool.Pool) {
	b.Helper()
	stmts := []string{
		`insert into workq.job_runs (queue, kind, payload, status, attempts, created_at, updated_at, finished_at, run_at, last_error)
		 select 'q' || (i % 4), case when i % 10 = 0 then 'report.build' else 'email.send' end,
		        jsonb_build_object('n', i, 'to', 'user' || i || '@example.com'),
		        case when i <= 950000 then 2 when i <= 980000 then 3 else 0 end,
		        case when i <= 980000 then 1 else 0 end,
		        now() - (1000000 - i) * interval '100 ms', now(), case when i <= 980000 then now() - (1000000 - i) * interval '100 ms' end,
		        now() - (1000000 - i) * interval '100 ms',
		        case when i > 950000 and i <= 980000 then case when i % 3 = 0 then 'smtp timeout after 30s' else 'bad address' end end
		 from generate_series(1, 1000000) i`,
		`insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
		 select workq.workq_run_id('job_runs', j.id, 1), 'job_runs', j.id, j.queue, 1, 1, gen_random_uuid(), 'w1',
		        now() - (1000000 - j.id % 1000000) * interval '3.6 ms', now() - (1000000 - j.id % 1000000) * interval '3.6 ms',
		        case when j.status = 3 then 'failed' else 'done' end, j.last_error
		 from workq.job_runs j where j.status >= 2`,
		`vacuum analyze workq.job_runs`,
		`vacuum analyze workq.runs`,
	}
	for _, s := range stmts {
		if _, err := pool.Exec(ctx, s); err != nil {
			b.Fatalf("%s: %v", s[:40], err)
		}
	}
}
