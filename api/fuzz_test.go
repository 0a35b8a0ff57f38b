package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workq/workq/internal/testdb"
)

// FuzzRequestBody sends arbitrary bodies to every endpoint that writes: the
// answer is never a 5xx, and a 4xx is a JSON Error with a message and
// changed nothing stored (snapshot). `make fuzz` runs it.
func FuzzRequestBody(f *testing.F) {
	endpoints := []struct{ method, path string }{
		{http.MethodPost, "/v1/jobs"},
		{http.MethodPost, "/v1/jobs/batch"},
		{http.MethodPost, "/v1/outbox"},
		{http.MethodPost, "/v1/outbox/batch"},
		{http.MethodPost, "/v1/timers"},
		{http.MethodPost, "/v1/timers/batch"},
		{http.MethodPost, "/v1/inbox"},
		{http.MethodPost, "/v1/inbox/batch"},
		{http.MethodPost, "/v1/schedules"},
		{http.MethodPut, "/v1/queues/job_runs/default/limit"},
		{http.MethodPost, "/v1/tables/job_runs/items/retry"},
	}
	for i, body := range []string{
		`{"kind":"k","payload":{"a":1}}`,
		`{"items":[{"kind":"k"},{"kind":""}]}`,
		`{"topic":"t","headers":{"X":"\udc00"},"partition_key":"k"}`,
		`{"items":[{"topic":"t","correlation_id":"\u0000"}]}`,
		`{"topic":"t","delay":"-1s"}`,
		`{"items":[{"topic":"t","due_time":"0001-01-01T00:00:00Z"}]}`,
		`{"source":"s","message_id":"m'; drop table inbox; --","payload":{}}`,
		`{"items":[{"source":"s","message_id":""}]}`,
		`{"name":"n","cron":"* * * * * * *","kind":"k"}`,
		`{"limit":-1}`,
		`{"ids":[1,2,3]}`,
		`{"kind":"k"}garbage`,
		`[`,
		``,
	} {
		f.Add(uint8(i), body)
	}
	pool := testdb.Pool(f)
	secret, entry, err := NewToken("fuzz", ScopeAdmin)
	if err != nil {
		f.Fatal(err)
	}
	tokens, err := ParseTokens([]string{entry})
	if err != nil {
		f.Fatal(err)
	}
	s, err := newServer(f, setup{Options: Options{Tokens: tokens}, pool: pool})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		ep := endpoints[int(which)%len(endpoints)]
		before := snapshot(t, pool)
		req := httptest.NewRequest(ep.method, ep.path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+secret)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: status %d: %s", ep.method, ep.path, body, rec.Code, rec.Body)
		}
		if rec.Code < 400 {
			return
		}
		var e Error
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Message == "" || e.Code == "" {
			t.Fatalf("%s %s %q: status %d with body %s: want a JSON error with a message and a code (%v)", ep.method, ep.path, body, rec.Code, rec.Body, err)
		}
		if after := snapshot(t, pool); after != before && rec.Code != http.StatusConflict {
			t.Fatalf("%s %s %q: status %d (%s) but the database changed", ep.method, ep.path, body, rec.Code, e.Message)
		}
	})
}
