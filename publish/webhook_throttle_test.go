package publish_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/publish"
)

// TestWebhookThrottle: a receiver that answers 429 (Retry-After in
// seconds) and then 503 (Retry-After as an HTTP-date) throttles the
// message instead of failing it: it is delivered on the third request
// without using an attempt (attempt 1 throughout), waits out each
// Retry-After, the run archive records both attempts as snoozed and
// throttled, and the outbox queue itself is throttled (FlowStatus lists
// it, made by the throttle alone), so the whole relay slows down.
func TestWebhookThrottle(t *testing.T) {
	target := newRecorder(t)
	var first time.Time
	target.on("/busy", func(w http.ResponseWriter, _ *http.Request, n int) {
		switch n {
		case 1:
			first = time.Now()
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.Header().Set("Retry-After", time.Now().Add(time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	pool := testdb.PoolWith(t, 8)
	wh, err := publish.NewWebhook(publish.WebhookConfig{URL: target.srv.URL + "/busy", Secret: testSecret,
		AllowHosts: []string{target.host()}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	startRelay(t, pool, relayConfig(), map[string]publisher{"hook.busy": wh.Handle}, worker.Options{})
	ids := enqueue(t, pool, message{Topic: "hook.busy", Payload: map[string]any{"n": 1}, MaxAttempts: 1})
	row := waitFinal(t, pool, ids[0].ID)
	reqs := target.requests("/busy")
	if row.Status != lease.StatusDone || row.Attempts != 1 || len(reqs) != 3 {
		t.Fatalf("ended %s after %d attempts and %d requests (last error %q); want done after 1 attempt (of max 1) and 3 requests",
			row.Status, row.Attempts, len(reqs), row.LastError)
	}
	for i, r := range reqs {
		if got := r.Header.Get(publish.HeaderAttempt); got != "1" {
			t.Errorf("request %d: %s %q, want 1: a throttled attempt used an attempt", i+1, publish.HeaderAttempt, got)
		}
	}
	// Retry-After: 2 then about 1 s: the third request came at least 2 s
	// after the first (a lower bound only).
	if took := time.Since(first); took < 2*time.Second {
		t.Errorf("delivered %s after the 429 with Retry-After 2", took)
	}

	var runs []string
	rows, err := pool.Query(context.Background(),
		`select outcome || ' ' || coalesce(error, '') from workq.runs where work_table = 'outbox' and item_id = $1 order by finished_at`, ids[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || !strings.HasPrefix(runs[0], "snoozed throttled for 2s") || !strings.Contains(runs[0], "429") ||
		!strings.HasPrefix(runs[1], "snoozed throttled for ") || !strings.Contains(runs[1], "503") || runs[2] != "done " {
		t.Errorf("run archive %q; want two snoozed runs saying throttled (429, 503), then done", runs)
	}

	c, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.FlowStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, th := range st.Throttles {
		found = found || th.Table == workq.TableOutbox && th.Queue == "default" && th.Kind == "" && th.Key == "" && (th.Rate > 0 || !th.Until.IsZero())
	}
	var auto bool
	for _, q := range st.Queues {
		auto = auto || q.Table == workq.TableOutbox && q.Queue == "default" && q.Auto
	}
	if !found || !auto {
		t.Errorf("FlowStatus %s: want the outbox queue default throttled or adapting, under flow control by the throttle (auto)", fmt.Sprintf("%+v", st))
	}
}
