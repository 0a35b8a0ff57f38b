package worker_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/internal/worker/builtin"
)

// A webhook whose receiver answers 500 shows up in the worker's log at
// warn level, one line per failure up to the limit per (table, queue) and
// window (10 per minute), then one line counting the failures it left out.
func TestFailingWebhookIsLogged(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusInternalServerError)
	}))
	defer receiver.Close()
	u, err := url.Parse(receiver.URL)
	if err != nil {
		t.Fatal(err)
	}

	var buf testutil.Buffer
	cfg := config.Default()
	cfg.Queues = []string{"hooks"}
	results := make(chan worker.Result, 20)
	w, err := worker.New(pool, cfg.Worker(), worker.Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
		OnResult: func(r worker.Result) { results <- r }})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register(builtin.WebhookKind, builtin.NewWebhook([]string{u.Host}, "", 5*time.Second).Handle); err != nil {
		t.Fatal(err)
	}
	const jobs = 13
	client := jobq.New(jobq.Options{})
	for range jobs {
		if _, err := client.Enqueue(ctx, pool, jobq.Job{Queue: "hooks", Kind: builtin.WebhookKind, MaxAttempts: 1,
			Payload: map[string]any{"url": receiver.URL + "/in", "body": map[string]int{"order": 42}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range jobs {
		select {
		case r := <-results:
			if r.Final() != "failed" {
				t.Fatalf("job %d ended %s, want failed", r.Item.ID, r.Final())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the jobs did not fail within 30s")
		}
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var failed, summaries []map[string]any
	for _, r := range buf.Records() {
		switch r["msg"] {
		case "handler failed":
			failed = append(failed, r)
		case "handler failures not logged (rate limit)":
			summaries = append(summaries, r)
		}
	}
	if len(failed) != 10 {
		t.Fatalf("%d 'handler failed' lines, want 10 (the limit per minute)", len(failed))
	}
	for _, r := range failed {
		if r["level"] != "WARN" || r["table"] != "job_runs" || r["queue"] != "hooks" || r["kind"] != "webhook" ||
			r["outcome"] != "failed" || !strings.Contains(r["err"].(string), "500") {
			t.Errorf("failure line %v: want WARN, job_runs/hooks, kind webhook, outcome failed and the 500 in err", r)
		}
	}
	if len(summaries) != 1 || summaries[0]["count"] != float64(jobs-10) || summaries[0]["level"] != "WARN" {
		t.Errorf("summary lines %v, want one WARN line counting %d failures not logged", summaries, jobs-10)
	}
}
