package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/internal/lease"
)

func TestAuth(t *testing.T) {
	e := newEnv(t)
	job := map[string]any{"kind": "k"}
	cases := []struct {
		name          string
		method, path  string
		header        string // Authorization; "" sends none
		body          any
		want          int
		wantChallenge string // in WWW-Authenticate
	}{
		{"no token", "GET", "/v1/queues", "", nil, 401, `Bearer realm="workq"`},
		{"unknown token", "GET", "/v1/queues", "Bearer wq_nope", nil, 401, `error="invalid_token"`},
		{"token of another scheme", "GET", "/v1/queues", "Basic " + e.admin, nil, 401, `error="invalid_request"`},
		{"empty bearer", "GET", "/v1/queues", "Bearer ", nil, 401, `error="invalid_request"`},
		{"read token reads", "GET", "/v1/queues", "Bearer " + e.read, nil, 200, ""},
		{"admin token reads", "GET", "/v1/tables/job_runs/items", "Bearer " + e.admin, nil, 200, ""},
		{"read token writes", "POST", "/v1/jobs", "Bearer " + e.read, job, 403, `error="insufficient_scope"`},
		{"read token pauses", "POST", "/v1/queues/job_runs/q/pause", "Bearer " + e.read, nil, 403, `error="insufficient_scope"`},
		{"no token writes", "POST", "/v1/jobs", "", job, 401, `Bearer realm="workq"`},
		{"bearer is case-insensitive", "GET", "/v1/queues", "bearer " + e.read, nil, 200, ""},
		{"healthz needs none", "GET", "/healthz", "", nil, 200, ""},
		{"readyz needs none", "GET", "/readyz", "", nil, 200, ""},
		{"openapi needs none", "GET", "/openapi.json", "", nil, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, e.pool)
			r := e.do(c.method, c.path, "", c.body, "Authorization", c.header)
			if r.status != c.want {
				t.Fatalf("status %d, want %d: %s", r.status, c.want, r.body)
			}
			if c.wantChallenge != "" && !strings.Contains(r.header.Get("WWW-Authenticate"), c.wantChallenge) {
				t.Errorf("WWW-Authenticate %q, want %q in it", r.header.Get("WWW-Authenticate"), c.wantChallenge)
			}
			if c.want >= 400 {
				if got := r.err(t).Code; got != map[int]string{401: CodeUnauthorized, 403: CodeForbidden}[c.want] {
					t.Errorf("code %q", got)
				}
				if after := snapshot(t, e.pool); after != before {
					t.Errorf("a refused request changed the database")
				}
			}
		})
	}
	// The admin token writes, and the write is the token's.
	r := e.must(201, "POST", "/v1/jobs", e.admin, job)
	var res jobResult
	r.decode(t, &res)
	if res.ID == 0 {
		t.Fatalf("no id: %s", r.body)
	}
}

func TestTokens(t *testing.T) {
	secret, entry, err := NewToken("ci-bot", ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, TokenPrefix) || strings.Contains(entry, secret) {
		t.Fatalf("secret %q, entry %q: the entry must hold the hash, not the secret", secret, entry)
	}
	toks, err := ParseTokens([]string{entry})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := match(toks, secret); !ok || got.Name != "ci-bot" || got.Scope != ScopeRead {
		t.Fatalf("match: %+v %v", got, ok)
	}
	if _, ok := match(toks, secret+"x"); ok {
		t.Fatal("a different secret matched")
	}
	hash := entry[strings.LastIndex(entry, ":")+1:]
	for _, c := range []struct {
		entries []string
		want    string
	}{
		{[]string{"a:read"}, "want NAME:SCOPE:SHA256-HEX"},
		{[]string{"a b:read:" + hash}, `name "a b"`},
		{[]string{"a:root:" + hash}, `scope "root": want read or admin`},
		{[]string{"a:read:" + secret}, "64 hex digits"},
		{[]string{"a:read:abc"}, "64 hex digits"},
		{[]string{"a:read:" + hash, "a:admin:" + strings.Repeat("0", 64)}, `name "a" given twice`},
		{[]string{"a:read:" + hash, "b:admin:" + hash}, "same hash"},
	} {
		if _, err := ParseTokens(c.entries); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseTokens(%q) = %v, want an error with %q", c.entries, err, c.want)
		}
	}
	if _, _, err := NewToken("a:b", ScopeAdmin); err == nil {
		t.Error("NewToken took a name with ':'")
	}
	if _, _, err := NewToken("a", "root"); err == nil {
		t.Error("NewToken took scope root")
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	e := newEnv(t)
	e.skipValidate = true // these paths and methods are not in the document, by design
	r := e.do("GET", "/v1/nothing", e.admin, nil)
	if r.status != 404 || r.err(t).Code != CodeNotFound {
		t.Fatalf("unknown path: %d %s", r.status, r.body)
	}
	r = e.do("DELETE", "/v1/jobs", e.admin, nil)
	if r.status != 405 || r.err(t).Code != CodeMethodNotAllowed || !strings.Contains(r.header.Get("Allow"), "POST") {
		t.Fatalf("wrong method: %d %s (Allow %q)", r.status, r.body, r.header.Get("Allow"))
	}
	e.skipValidate = false
	r = e.do("GET", "/v1/tables/nosuch/items", e.read, nil)
	if r.status != 404 || !strings.Contains(r.err(t).Message, `no work table "nosuch"`) {
		t.Fatalf("unknown table: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/tables/job_runs/items/12345", e.read, nil)
	if r.status != 404 {
		t.Fatalf("unknown item: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/schedules/nosuch", e.read, nil)
	if r.status != 404 {
		t.Fatalf("unknown schedule: %d %s", r.status, r.body)
	}
}

func TestEnqueueRoundTrips(t *testing.T) {
	e := newEnv(t)
	// Job runs, one and a batch with a run_at (one transaction) and a dedup key.
	var one jobResult
	e.must(201, "POST", "/v1/jobs", e.admin, map[string]any{"queue": "mail", "kind": "email.send", "payload": map[string]any{"to": "a@example.com"},
		"priority": 5, "delay": "1m", "max_attempts": 3, "dedup_key": "k1"}).decode(t, &one)
	var dup jobResult
	e.must(200, "POST", "/v1/jobs", e.admin, map[string]any{"queue": "mail", "kind": "email.send", "dedup_key": "k1"}).decode(t, &dup)
	if !dup.Duplicate || dup.ID != one.ID {
		t.Fatalf("dedup: %+v vs %+v", dup, one)
	}
	var got itemWithAttempts
	e.must(200, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d", one.ID), e.read, nil).decode(t, &got)
	if got.Item.Queue != "mail" || got.Item.Kind != "email.send" || got.Item.Priority != 5 || got.Item.MaxAttempts != 3 ||
		string(got.Item.Payload) != `{"to":"a@example.com"}` || !got.Item.RunAt.After(time.Now().Add(30*time.Second)) {
		t.Fatalf("stored job: %+v payload %s", got.Item, got.Item.Payload)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var batch items[jobResult]
	e.must(201, "POST", "/v1/jobs/batch", e.admin, map[string]any{"items": []any{
		map[string]any{"kind": "a"}, map[string]any{"kind": "b", "run_at": at.Format(time.RFC3339)}, map[string]any{"kind": "c", "delay": "5s"},
	}}).decode(t, &batch)
	if len(batch.Items) != 3 {
		t.Fatalf("batch: %+v", batch)
	}
	e.must(200, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d", batch.Items[1].ID), e.read, nil).decode(t, &got)
	if !got.Item.RunAt.Equal(at) || got.Item.Queue != "default" {
		t.Fatalf("run_at: %+v", got.Item)
	}
	var plain items[jobResult]
	e.must(201, "POST", "/v1/jobs/batch", e.admin, map[string]any{"items": []any{map[string]any{"kind": "a"}, map[string]any{"kind": "a", "queue": "q2"}}}).decode(t, &plain)
	if len(plain.Items) != 2 || plain.Items[0].ID == plain.Items[1].ID {
		t.Fatalf("plain batch: %+v", plain)
	}

	// Outbox: a taken message id is a conflict that writes nothing.
	mid := "0190b6f4-0000-7000-8000-000000000001"
	msg := map[string]any{"topic": "order.created", "partition_key": "order-1", "headers": map[string]string{"X-Trace": "t1"},
		"message_id": mid, "correlation_id": "c1", "payload": map[string]any{"id": 1}}
	var sent struct {
		ID        int64  `json:"id"`
		MessageID string `json:"message_id"`
	}
	e.must(201, "POST", "/v1/outbox", e.admin, msg).decode(t, &sent)
	if sent.MessageID != mid {
		t.Fatalf("sent %+v", sent)
	}
	before := snapshot(t, e.pool)
	if r := e.must(409, "POST", "/v1/outbox", e.admin, msg); r.err(t).Code != CodeConflict {
		t.Fatalf("duplicate message id: %s", r.body)
	}
	if snapshot(t, e.pool) != before {
		t.Fatal("a refused outbox message changed the database")
	}
	var sentMany items[map[string]any]
	e.must(201, "POST", "/v1/outbox/batch", e.admin, map[string]any{"items": []any{
		map[string]any{"topic": "t", "partition_key": "k"}, map[string]any{"topic": "t", "partition_key": "k", "run_at": at.Format(time.RFC3339)},
	}}).decode(t, &sentMany)
	if len(sentMany.Items) != 2 {
		t.Fatalf("outbox batch %+v", sentMany)
	}

	// Timers.
	var tr timerResult
	e.must(201, "POST", "/v1/timers", e.admin, map[string]any{"topic": "remind", "delay": "90s"}).decode(t, &tr)
	if tr.ID == 0 || tr.DueNow {
		t.Fatalf("timer %+v", tr)
	}
	var trs items[timerResult]
	e.must(201, "POST", "/v1/timers/batch", e.admin, map[string]any{"items": []any{
		map[string]any{"topic": "a", "due_time": "2020-01-01T00:00:00Z"}, map[string]any{"topic": "b", "delay": "1h"},
	}}).decode(t, &trs)
	if len(trs.Items) != 2 || !trs.Items[0].DueNow || trs.Items[1].DueNow {
		t.Fatalf("timers batch %+v", trs)
	}

	// Inbox: new, duplicate, conflict.
	in := map[string]any{"source": "shop", "message_id": "m-1", "topic": "order", "payload": map[string]any{"n": 1}}
	var ir inboxResult
	e.must(201, "POST", "/v1/inbox", e.admin, in).decode(t, &ir)
	if ir.Result != "new" || ir.Status != "ready" {
		t.Fatalf("receive %+v", ir)
	}
	var ir2 inboxResult
	e.must(200, "POST", "/v1/inbox", e.admin, in).decode(t, &ir2)
	if ir2.Result != "duplicate" || ir2.ID != ir.ID {
		t.Fatalf("duplicate %+v", ir2)
	}
	in["payload"] = map[string]any{"n": 2}
	before = snapshot(t, e.pool)
	r := e.must(409, "POST", "/v1/inbox", e.admin, in)
	if ce := r.err(t); ce.Code != CodeConflict || ce.ID != ir.ID {
		t.Fatalf("conflict %s", r.body)
	}
	// A batch with one conflict receives nothing.
	r = e.must(409, "POST", "/v1/inbox/batch", e.admin, map[string]any{"items": []any{
		map[string]any{"source": "shop", "message_id": "m-2"}, in,
	}})
	if ce := r.err(t); len(ce.Conflicts) != 1 || ce.Conflicts[0].Index != 1 || ce.Conflicts[0].ID != ir.ID {
		t.Fatalf("batch conflict %s", r.body)
	}
	if snapshot(t, e.pool) != before {
		t.Fatal("a conflicting inbox request changed the database")
	}
	var irs items[inboxResult]
	e.must(201, "POST", "/v1/inbox/batch", e.admin, map[string]any{"items": []any{
		map[string]any{"source": "shop", "message_id": "m-2"}, map[string]any{"source": "shop", "message_id": "m-1", "topic": "order", "payload": map[string]any{"n": 1}},
	}}).decode(t, &irs)
	if len(irs.Items) != 2 || irs.Items[0].Result != "new" || irs.Items[1].Result != "duplicate" {
		t.Fatalf("inbox batch %+v", irs)
	}
}

// TestValidation sends bad requests: each gets 400 (413 for a body over
// the limit, 415 for a body that is not JSON) with a message naming what
// is wrong, and changes nothing in the database.
func TestValidation(t *testing.T) {
	e := newEnv(t, func(o *setup) { o.config.MaxPayloadBytes = 1000; o.MaxBodyBytes = 64 << 10 })
	// Rows for the actions and filters to find.
	c := jobq.New(jobq.Options{})
	if _, err := c.Enqueue(context.Background(), e.pool, jobq.Job{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	e.must(201, "POST", "/v1/schedules", e.admin, map[string]any{"name": "nightly", "cron": "@daily", "kind": "k"})

	big := `{"kind":"k","payload":{"x":"` + strings.Repeat("a", 2000) + `"}}`
	huge := `{"kind":"k","payload":{"x":"` + strings.Repeat("a", 70<<10) + `"}}`
	manyIDs := make([]int64, 1001)
	for i := range manyIDs {
		manyIDs[i] = int64(i + 1)
	}
	manyJobs := make([]any, 1001)
	for i := range manyJobs {
		manyJobs[i] = map[string]any{"kind": "k"}
	}
	cases := []struct {
		name         string
		method, path string
		body         any
		ctype        string // Content-Type; "" keeps application/json
		want         int
		wantMsg      string
		wantField    string
	}{
		{"unknown field", "POST", "/v1/jobs", raw(`{"kind":"k","colour":"red"}`), "", 400, "unknown field", "colour"},
		{"wrong type", "POST", "/v1/jobs", raw(`{"kind":"k","priority":"high"}`), "", 400, "want a whole number from -32768 to 32767", "priority"},
		{"priority out of range", "POST", "/v1/jobs", raw(`{"kind":"k","priority":40000}`), "", 400, "-32768 to 32767", "priority"},
		{"not an object", "POST", "/v1/jobs", raw(`[1,2]`), "", 400, "must be a JSON object", ""},
		{"trailing garbage", "POST", "/v1/jobs", raw(`{"kind":"k"} {"kind":"k"}`), "", 400, "data after its JSON value", ""},
		{"trailing junk", "POST", "/v1/jobs", raw(`{"kind":"k"}x`), "", 400, "data after its JSON value", ""},
		{"broken JSON", "POST", "/v1/jobs", raw(`{"kind":`), "", 400, "not valid JSON", ""},
		{"empty body", "POST", "/v1/jobs", raw(``), "", 400, "empty", ""},
		{"body over the limit", "POST", "/v1/jobs", raw(huge), "", 413, "larger than the limit of 65536 bytes", ""},
		{"not JSON", "POST", "/v1/jobs", raw(`kind=k`), "application/x-www-form-urlencoded", 415, "application/json", ""},
		{"no content type", "POST", "/v1/jobs", raw(`{"kind":"k"}`), "-", 415, "Content-Type", ""},
		{"latin-1 JSON", "POST", "/v1/jobs", raw(`{"kind":"k"}`), "application/json; charset=latin1", 415, "UTF-8", ""},
		{"bad kind", "POST", "/v1/jobs", map[string]any{"kind": "no spaces"}, "", 400, `kind "no spaces" is not a valid name`, "kind"},
		{"no kind", "POST", "/v1/jobs", map[string]any{"queue": "q"}, "", 400, `kind "" is not a valid name`, "kind"},
		{"empty queue", "POST", "/v1/jobs", map[string]any{"kind": "k", "queue": ""}, "", 400, "must not be empty", "queue"},
		{"bad queue", "POST", "/v1/jobs", map[string]any{"kind": "k", "queue": "a/b"}, "", 400, "not a valid name", "queue"},
		{"bad duration", "POST", "/v1/jobs", map[string]any{"kind": "k", "delay": "soon"}, "", 400, "not a duration", "delay"},
		{"seconds are not a duration", "POST", "/v1/jobs", raw(`{"kind":"k","delay":30}`), "", 400, "want a string", "delay"},
		{"negative duration", "POST", "/v1/jobs", map[string]any{"kind": "k", "delay": "-5s"}, "", 400, "negative", "delay"},
		{"delay and run_at", "POST", "/v1/jobs", map[string]any{"kind": "k", "delay": "5s", "run_at": "2030-01-01T00:00:00Z"}, "", 400, "not both", "delay"},
		{"bad time", "POST", "/v1/jobs", map[string]any{"kind": "k", "run_at": "tomorrow"}, "", 400, "RFC 3339", "run_at"},
		{"zero time", "POST", "/v1/jobs", map[string]any{"kind": "k", "run_at": "0001-01-01T00:00:00Z"}, "", 400, "zero time", "run_at"},
		{"payload over the limit", "POST", "/v1/jobs", raw(big), "", 400, "more than the limit of 1000 bytes", "payload"},
		// Issue 28, item 4: times outside UTC years 1 to 9999 (PostgreSQL
		// stored them, JSON could not write them back).
		{"run_at in year 0", "POST", "/v1/jobs", map[string]any{"kind": "k", "run_at": "0000-06-01T00:00:00Z"}, "", 400, "out of range", "run_at"},
		{"run_at in year 10000 in UTC", "POST", "/v1/jobs", map[string]any{"kind": "k", "run_at": "9999-12-31T23:00:00-10:00"}, "", 400, "out of range", "run_at"},
		{"run_at out of range, batch", "POST", "/v1/jobs/batch", map[string]any{"items": []any{map[string]any{"kind": "k"}, map[string]any{"kind": "k", "run_at": "0000-01-01T00:00:00Z"}}}, "", 400, "out of range", "items[1].run_at"},
		{"outbox run_at out of range", "POST", "/v1/outbox", map[string]any{"topic": "t", "run_at": "9999-12-31T23:59:59-01:00"}, "", 400, "out of range", "run_at"},
		{"outbox run_at out of range, batch", "POST", "/v1/outbox/batch", map[string]any{"items": []any{map[string]any{"topic": "t"}, map[string]any{"topic": "t", "run_at": "0000-12-31T23:59:59Z"}}}, "", 400, "out of range", "items[1].run_at"},
		{"timer due_time out of range", "POST", "/v1/timers", map[string]any{"topic": "t", "due_time": "0000-01-01T00:00:00Z"}, "", 400, "out of range", "due_time"},
		{"timer due_time out of range, batch", "POST", "/v1/timers/batch", map[string]any{"items": []any{map[string]any{"topic": "t", "delay": "1s"}, map[string]any{"topic": "t", "due_time": "9999-12-31T23:59:59-00:01"}}}, "", 400, "out of range", "items[1].due_time"},
		{"payload not an object", "POST", "/v1/jobs", map[string]any{"kind": "k", "payload": []int{1}}, "", 400, "must be a JSON object", "payload"},
		{"payload null", "POST", "/v1/jobs", raw(`{"kind":"k","payload":null}`), "", 400, "must be a JSON object", "payload"},
		{"max attempts", "POST", "/v1/jobs", map[string]any{"kind": "k", "max_attempts": 5000}, "", 400, "max attempts must be between 1 and 1000", "max_attempts"},
		{"batch bad item", "POST", "/v1/jobs/batch", map[string]any{"items": []any{map[string]any{"kind": "k"}, map[string]any{"kind": "k", "delay": "x"}}}, "", 400, "not a duration", "items[1].delay"},
		{"batch bad kind", "POST", "/v1/jobs/batch", map[string]any{"items": []any{map[string]any{"kind": "k"}, map[string]any{"kind": "a b"}}}, "", 400, `items[1]: kind "a b"`, "items[1].kind"},
		{"batch empty", "POST", "/v1/jobs/batch", map[string]any{"items": []any{}}, "", 400, "give 1 to 1000 items", "items"},
		{"batch too large", "POST", "/v1/jobs/batch", map[string]any{"items": manyJobs}, "", 400, "1001 items, want at most 1000", "items"},
		{"outbox bad message id", "POST", "/v1/outbox", map[string]any{"topic": "t", "message_id": "nope"}, "", 400, "not a UUID", "message_id"},
		{"outbox empty key", "POST", "/v1/outbox", map[string]any{"topic": "t", "partition_key": ""}, "", 400, "must not be empty", "partition_key"},
		{"outbox bad header", "POST", "/v1/outbox", map[string]any{"topic": "t", "headers": map[string]string{"bad name": "v"}}, "", 400, "header", "headers"},
		{"outbox batch same message id", "POST", "/v1/outbox/batch", map[string]any{"items": []any{
			map[string]any{"topic": "t", "message_id": "0190b6f4-0000-7000-8000-000000000009"},
			map[string]any{"topic": "t", "message_id": "0190b6f4-0000-7000-8000-000000000009"}}}, "", 400, "also items[0]'s", "items[1].message_id"},
		{"timer without time", "POST", "/v1/timers", map[string]any{"topic": "t"}, "", 400, "give due_time", "due_time"},
		{"timer zero delay", "POST", "/v1/timers", map[string]any{"topic": "t", "delay": "0s"}, "", 400, "must be positive", "delay"},
		{"timer both", "POST", "/v1/timers", map[string]any{"topic": "t", "delay": "1s", "due_time": "2030-01-01T00:00:00Z"}, "", 400, "not both", "delay"},
		{"inbox no source", "POST", "/v1/inbox", map[string]any{"message_id": "m"}, "", 400, "source", "source"},
		{"too many ids", "POST", "/v1/tables/job_runs/items/retry", map[string]any{"ids": manyIDs}, "", 400, "1001 ids, want at most 1000", "ids"},
		{"no ids", "POST", "/v1/tables/job_runs/items/cancel", map[string]any{"ids": []int64{}}, "", 400, "no ids", "ids"},
		{"id twice", "POST", "/v1/tables/job_runs/items/delete", map[string]any{"ids": []int64{1, 1}}, "", 400, "given twice", "ids"},
		{"negative id", "POST", "/v1/tables/job_runs/items/cancel", map[string]any{"ids": []int64{-1}}, "", 400, "id -1", "ids"},
		{"reason too long", "POST", "/v1/tables/job_runs/items/cancel", map[string]any{"ids": []int64{1}, "reason": strings.Repeat("r", 2000)}, "", 400, "reason is 2000 bytes", "reason"},
		{"bad cursor", "GET", "/v1/tables/job_runs/items?cursor=abc", nil, "", 400, "not a cursor", "cursor"},
		{"bad limit", "GET", "/v1/tables/job_runs/items?limit=5000", nil, "", 400, "1 to 1000", "limit"},
		{"bad status", "GET", "/v1/tables/job_runs/items?status=sleeping", nil, "", 400, `status "sleeping"`, "status"},
		{"bad created_after", "GET", "/v1/tables/job_runs/items?created_after=yesterday", nil, "", 400, "RFC 3339", "created_after"},
		{"unknown parameter", "GET", "/v1/tables/job_runs/items?colour=red", nil, "", 400, "unknown query parameter", "colour"},
		{"repeated parameter", "GET", "/v1/tables/job_runs/items?queue=a&queue=b", nil, "", 400, "given 2 times", "queue"},
		{"bad item id", "GET", "/v1/tables/job_runs/items/abc", nil, "", 400, "whole number", "id"},
		{"empty error filter", "GET", "/v1/tables/job_runs/items?error=", nil, "", 400, "must not be empty", "error"},
		{"error filter too long", "GET", "/v1/tables/job_runs/items?error=" + strings.Repeat("e", 300), nil, "", 400, "error text is 300 bytes", "error"},
		{"matching without filter", "POST", "/v1/tables/job_runs/items/delete-matching", map[string]any{}, "", 400, "required", "filter"},
		{"matching bad status", "POST", "/v1/tables/job_runs/items/retry-matching", map[string]any{"filter": map[string]any{"status": "gone"}}, "", 400, `status "gone"`, "status"},
		{"matching empty queue", "POST", "/v1/tables/job_runs/items/cancel-matching", map[string]any{"filter": map[string]any{"queue": ""}}, "", 400, "must not be empty", "filter.queue"},
		{"matching bad time", "POST", "/v1/tables/job_runs/items/delete-matching", map[string]any{"filter": map[string]any{"created_after": "now"}}, "", 400, "RFC 3339", "filter.created_after"},
		{"matching bad cursor", "POST", "/v1/tables/job_runs/items/delete-matching", map[string]any{"filter": map[string]any{"cursor": "x"}}, "", 400, "not a cursor", "filter.cursor"},
		{"matching unknown filter field", "POST", "/v1/tables/job_runs/items/delete-matching", map[string]any{"filter": map[string]any{"colour": "red"}}, "", 400, "unknown field", "colour"},
		{"matching max too large", "POST", "/v1/tables/job_runs/items/cancel-matching", map[string]any{"filter": map[string]any{}, "max": 200000}, "", 400, "1 to 100000", "max"},
		{"matching max zero", "POST", "/v1/tables/job_runs/items/cancel-matching", map[string]any{"filter": map[string]any{}, "max": 0}, "", 400, "1 to 100000", "max"},
		{"matching reason too long", "POST", "/v1/tables/job_runs/items/cancel-matching", map[string]any{"filter": map[string]any{}, "reason": strings.Repeat("r", 2000)}, "", 400, "reason is 2000 bytes", "reason"},
		{"pause bad queue", "POST", "/v1/queues/job_runs/a%20b/pause", nil, "", 400, "not a valid name", "queue"},
		{"pause reason too long", "POST", "/v1/queues/job_runs/q/pause", map[string]any{"reason": strings.Repeat("r", 2000)}, "", 400, "reason", "reason"},
		{"pause reason with NUL", "POST", "/v1/queues/job_runs/q/pause", raw(`{"reason":"a\u0000b"}`), "", 400, "without NUL", "reason"},
		{"cancel reason with NUL", "POST", "/v1/tables/job_runs/items/cancel", raw(`{"ids":[1],"reason":"a\u0000b"}`), "", 400, "without NUL", "actor"},
		{"outbox correlation id with NUL", "POST", "/v1/outbox", raw(`{"topic":"t","correlation_id":"a\u0000b"}`), "", 400, "correlation id", "correlation_id"},
		{"inbox message id with NUL", "POST", "/v1/inbox", raw(`{"source":"s","message_id":"a\u0000b"}`), "", 400, "message id", "message_id"},
		{"SQL in a schedule name", "POST", "/v1/schedules", map[string]any{"name": "x'); delete from job_runs; --", "cron": "* * * * *", "kind": "k"}, "", 400, "not a valid name", "name"},
		{"limit negative", "PUT", "/v1/queues/job_runs/q/limit", map[string]any{"limit": -1}, "", 400, "0 to 2147483647", "limit"},
		{"limit too large", "PUT", "/v1/queues/job_runs/q/limit", map[string]any{"limit": 3000000000}, "", 400, "0 to 2147483647", "limit"},
		{"limit missing", "PUT", "/v1/queues/job_runs/q/limit", map[string]any{}, "", 400, "want W", "limit"},
		{"limit bad queue", "PUT", "/v1/queues/job_runs/a%20b/limit", map[string]any{"limit": 3}, "", 400, "not a valid name", "queue"},
		{"schedule bad cron", "POST", "/v1/schedules", map[string]any{"name": "s", "cron": "every day", "kind": "k"}, "", 400, "cron", "cron"},
		{"schedule bad zone", "POST", "/v1/schedules", map[string]any{"name": "s", "cron": "@daily", "kind": "k", "timezone": "Mars/Olympus"}, "", 400, "unknown time zone", "timezone"},
		{"schedule bad name", "POST", "/v1/schedules", map[string]any{"name": "a b", "cron": "@daily", "kind": "k"}, "", 400, "schedule name", "name"},
		{"schedule zero attempts", "POST", "/v1/schedules", map[string]any{"name": "s", "cron": "@daily", "kind": "k", "max_attempts": 0}, "", 400, "must not be 0", "max_attempts"},
		{"schedule bad every", "POST", "/v1/schedules", map[string]any{"name": "s", "cron": "@every 1.5s", "kind": "k"}, "", 400, "whole number of seconds", "cron"},
		{"schedule payload over the limit", "POST", "/v1/schedules", raw(`{"name":"s","cron":"@daily","kind":"k","payload":{"x":"` + strings.Repeat("a", 2000) + `"}}`), "", 400, "more than the limit", "payload"},
		{"schedule empty patch", "PATCH", "/v1/schedules/nightly", map[string]any{}, "", 400, "nothing to update", ""},
		{"schedule bad patch", "PATCH", "/v1/schedules/nightly", map[string]any{"overlap": "sometimes"}, "", 400, "overlap policy", "overlap"},
		{"trigger unknown field", "POST", "/v1/schedules/nightly/trigger", map[string]any{"now": true}, "", 400, "unknown field", "now"},
		{"pause without content type", "POST", "/v1/queues/job_runs/q/pause", nil, "-", 415, "also with an empty body", ""},
		{"trigger with a form type", "POST", "/v1/schedules/nightly/trigger", nil, "application/x-www-form-urlencoded", 415, "application/json", ""},
		// Strict JSON (issue 18): what encoding/json lets through silently.
		{"name in another case", "POST", "/v1/jobs", raw(`{"KIND":"k"}`), "", 400, `case-sensitive: did you mean "kind"`, "KIND"},
		{"name in another case, nested", "POST", "/v1/tables/job_runs/items/delete-matching", raw(`{"filter":{"Queue":"q"}}`), "", 400, "case-sensitive", "filter.Queue"},
		{"name in another case, batch", "POST", "/v1/outbox/batch", raw(`{"items":[{"topic":"t"},{"topic":"t","Delay":"1s"}]}`), "", 400, "case-sensitive", "items[1].Delay"},
		{"name given twice", "POST", "/v1/jobs", raw(`{"kind":"k","kind":"other"}`), "", 400, "given twice", "kind"},
		{"name given twice in two cases", "POST", "/v1/jobs", raw(`{"kind":"k","Kind":"other"}`), "", 400, "case-sensitive", "Kind"},
		{"name given twice, batch", "POST", "/v1/jobs/batch", raw(`{"items":[{"kind":"k"},{"kind":"k","queue":"a","queue":"b"}]}`), "", 400, "given twice", "items[1].queue"},
		{"name given twice in a payload", "POST", "/v1/jobs", raw(`{"kind":"k","payload":{"a":{"b":1,"b":2}}}`), "", 400, "given twice", "payload.a.b"},
		{"name given twice in headers", "POST", "/v1/outbox", raw(`{"topic":"t","headers":{"X":"1","X":"2"}}`), "", 400, "given twice", "headers.X"},
		{"top level given twice", "PUT", "/v1/queues/job_runs/q/limit", raw(`{"limit":1,"limit":2}`), "", 400, "given twice", "limit"},
		{"lone high surrogate", "POST", "/v1/jobs", raw(`{"kind":"k","payload":{"s":"\ud800"}}`), "", 400, "surrogate", "payload.s"},
		{"lone low surrogate", "POST", "/v1/outbox", raw(`{"topic":"\udc00x"}`), "", 400, "surrogate", "topic"},
		{"high surrogate before a letter", "POST", "/v1/jobs", raw(`{"kind":"k","dedup_key":"\uD800\u0041"}`), "", 400, "surrogate", "dedup_key"},
		{"surrogates the wrong way round", "POST", "/v1/jobs", raw(`{"kind":"k","dedup_key":"\udc00\ud800"}`), "", 400, "surrogate", "dedup_key"},
		{"lone surrogate in a name", "POST", "/v1/jobs", raw(`{"kind":"k","payload":{"\ud800":1}}`), "", 400, "member name", "payload"},
		{"lone surrogate in an array", "POST", "/v1/jobs", raw(`{"kind":"k","payload":{"a":["ok","\udfff"]}}`), "", 400, "surrogate", "payload.a[1]"},
		{"invalid UTF-8", "POST", "/v1/jobs", raw("{\"kind\":\"k\",\"dedup_key\":\"a\xffb\"}"), "", 400, "not valid UTF-8", "dedup_key"},
		{"invalid UTF-8 in a header", "POST", "/v1/outbox", raw("{\"topic\":\"t\",\"headers\":{\"X\":\"\xc3\"}}"), "", 400, "not valid UTF-8", "headers.X"},
		{"invalid UTF-8 in a name", "POST", "/v1/jobs", raw("{\"kind\":\"k\",\"payload\":{\"\xed\xa0\x80\":1}}"), "", 400, "not valid UTF-8", "payload"},
		{"invalid UTF-8 in a schedule", "POST", "/v1/schedules", raw("{\"name\":\"s\",\"cron\":\"@daily\",\"kind\":\"k\",\"payload\":{\"x\":\"\xc0\xaf\"}}"), "", 400, "not valid UTF-8", "payload.x"},
		// C1 control characters in topics: the topic rule the Go clients and the CLI share.
		{"C1 in an outbox topic", "POST", "/v1/outbox", raw(`{"topic":"a\u0085b"}`), "", 400, "topic", "topic"},
		{"C1 in a timer topic, as UTF-8", "POST", "/v1/timers", raw("{\"topic\":\"a\u009fb\",\"delay\":\"1s\"}"), "", 400, "topic", "topic"},
		{"C1 in an inbox topic", "POST", "/v1/inbox", raw(`{"source":"s","message_id":"m","topic":"\u0080"}`), "", 400, "topic", "topic"},
		{"C1 in a partition key", "POST", "/v1/outbox", raw(`{"topic":"t","partition_key":"k\u009b"}`), "", 400, "partition key", "partition_key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, e.pool)
			var hdr []string
			switch c.ctype {
			case "":
			case "-":
				hdr = []string{"Content-Type", ""}
			default:
				hdr = []string{"Content-Type", c.ctype}
			}
			r := e.do(c.method, c.path, e.admin, c.body, hdr...)
			if r.status != c.want {
				t.Fatalf("status %d, want %d: %s", r.status, c.want, r.body)
			}
			er := r.err(t)
			if !strings.Contains(er.Message, c.wantMsg) {
				t.Errorf("message %q does not say %q", er.Message, c.wantMsg)
			}
			if er.Field != c.wantField {
				t.Errorf("field %q, want %q (%s)", er.Field, c.wantField, er.Message)
			}
			if after := snapshot(t, e.pool); after != before {
				t.Errorf("a rejected request changed the database:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestItemActions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := jobq.New(jobq.Options{})
	var ids []int64
	for range 3 {
		r, err := c.Enqueue(ctx, e.pool, jobq.Job{Queue: "mail", Kind: "email.send", MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	// Cancel two ready jobs; an unknown id is skipped.
	var res struct{ Applied, Skipped []int64 }
	e.must(200, "POST", "/v1/tables/job_runs/items/cancel", e.admin, map[string]any{"ids": []int64{ids[0], ids[1], 999999}, "reason": "duplicate"}).decode(t, &res)
	if fmt.Sprint(res.Applied) != fmt.Sprint(ids[:2]) || fmt.Sprint(res.Skipped) != "[999999]" {
		t.Fatalf("cancel: %+v", res)
	}
	var got itemWithAttempts
	e.must(200, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d", ids[0]), e.read, nil).decode(t, &got)
	if got.Item.Status != "cancelled" || !strings.Contains(got.Item.LastError, "cancelled by api:ops") || len(got.Attempts) != 1 ||
		got.Attempts[0].Worker != "api:ops" {
		t.Fatalf("cancelled item: %+v attempts %+v", got.Item, got.Attempts)
	}
	// Retry puts one back: attempts reset, the archive keeps the actor.
	e.must(200, "POST", "/v1/tables/job_runs/items/retry", e.admin, map[string]any{"ids": []int64{ids[0], ids[2]}, "reason": "undo"}).decode(t, &res)
	if fmt.Sprint(res.Applied) != fmt.Sprint(ids[:1]) || fmt.Sprint(res.Skipped) != fmt.Sprint(ids[2:]) {
		t.Fatalf("retry: %+v", res)
	}
	e.must(200, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d", ids[0]), e.read, nil).decode(t, &got)
	if got.Item.Status != "ready" || got.Item.Attempts != 0 || len(got.Attempts) != 2 {
		t.Fatalf("retried item: %+v attempts %+v", got.Item, got.Attempts)
	}
	// Delete takes finished items only.
	e.must(200, "POST", "/v1/tables/job_runs/items/delete", e.admin, map[string]any{"ids": []int64{ids[0], ids[1]}}).decode(t, &res)
	if fmt.Sprint(res.Applied) != fmt.Sprint(ids[1:2]) || fmt.Sprint(res.Skipped) != fmt.Sprint(ids[:1]) {
		t.Fatalf("delete: %+v", res)
	}
	e.must(404, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d", ids[1]), e.read, nil)

	// Filters: status and kind.
	var page listPage
	e.must(200, "GET", "/v1/tables/job_runs/items?status=ready&queue=mail&kind=email.send", e.read, nil).decode(t, &page)
	if len(page.Items) != 2 || page.NextCursor != nil {
		t.Fatalf("filtered page: %+v", page)
	}
	e.must(200, "GET", "/v1/tables/job_runs/items?status=failed", e.read, nil).decode(t, &page)
	if len(page.Items) != 0 {
		t.Fatalf("failed page: %+v", page)
	}
	// The other tables answer too.
	for _, tb := range lease.Tables {
		e.must(200, "GET", "/v1/tables/"+string(tb)+"/items?limit=1", e.read, nil)
	}
}

// TestMatchingActions acts on every item a filter matches, with a cap and
// the cursor to go on from, and filters pages by the text of last_error.
func TestMatchingActions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `insert into workq.job_runs (queue, kind, payload, status, finished_at, last_error)
		select 'mail', 'email.send', '{}', 3, now(), case when i % 2 = 0 then 'SMTP timeout' else 'bad address' end
		from generate_series(1, 30) i`); err != nil {
		t.Fatal(err)
	}
	var page listPage
	e.must(200, "GET", "/v1/tables/job_runs/items?error=smtp&limit=100", e.read, nil).decode(t, &page)
	if len(page.Items) != 15 || page.NextCursor != nil || !strings.Contains(page.Items[0].LastError, "SMTP") {
		t.Fatalf("error filter: %d items, next %v", len(page.Items), page.NextCursor)
	}
	e.must(403, "POST", "/v1/tables/job_runs/items/retry-matching", e.read, map[string]any{"filter": map[string]any{}})

	var res matchingResult
	filter := map[string]any{"queue": "mail", "status": "failed", "error": "timeout"}
	e.must(200, "POST", "/v1/tables/job_runs/items/retry-matching", e.admin, map[string]any{"filter": filter, "reason": "smtp back", "max": 10}).decode(t, &res)
	if res.Applied != 10 || res.Skipped != 0 || res.Batches != 1 || res.NextCursor == nil {
		t.Fatalf("capped retry: %+v", res)
	}
	filter["cursor"] = *res.NextCursor
	e.must(200, "POST", "/v1/tables/job_runs/items/retry-matching", e.admin, map[string]any{"filter": filter}).decode(t, &res)
	if res.Applied != 5 || res.NextCursor != nil {
		t.Fatalf("rest of the retry: %+v", res)
	}
	var ready int
	if err := e.pool.QueryRow(ctx, `select count(*) from workq.job_runs_all where status = 0 and last_error = 'SMTP timeout'`).Scan(&ready); err != nil || ready != 15 {
		t.Fatalf("%d retried (%v), want 15", ready, err)
	}
	// Delete every finished item of the queue: the ready ones are skipped.
	e.must(200, "POST", "/v1/tables/job_runs/items/delete-matching", e.admin, map[string]any{"filter": map[string]any{"queue": "mail"}}).decode(t, &res)
	if res.Applied != 15 || res.Skipped != 15 || res.NextCursor != nil {
		t.Fatalf("delete matching: %+v", res)
	}
	e.must(200, "POST", "/v1/tables/job_runs/items/cancel-matching", e.admin, map[string]any{"filter": map[string]any{"kind": "email.send"}}).decode(t, &res)
	if res.Applied != 15 {
		t.Fatalf("cancel matching: %+v", res)
	}
}

// TestPaginationStableUnderInserts pages through a table with the cursor
// while another goroutine inserts: every row that existed at the start is
// seen exactly once, and no row is seen twice.
func TestPaginationStableUnderInserts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := jobq.New(jobq.Options{})
	jobs := make([]jobq.Job, 500)
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: "bulk", Kind: "k"}
	}
	res, err := c.EnqueueMany(ctx, e.pool, jobs)
	if err != nil {
		t.Fatal(err)
	}
	initial := map[int64]bool{}
	for _, r := range res {
		initial[r.ID] = true
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.EnqueueMany(ctx, e.pool, jobs[:5]); err != nil {
				done <- err
				return
			}
			if n > 10000 {
				return
			}
		}
	}()
	seen := map[int64]bool{}
	cursor := ""
	pages := 0
	for {
		path := "/v1/tables/job_runs/items?queue=bulk&limit=37"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page listPage
		e.must(200, "GET", path, e.read, nil).decode(t, &page)
		pages++
		for _, it := range page.Items {
			if seen[it.ID] {
				t.Fatalf("item %d seen twice (page %d)", it.ID, pages)
			}
			seen[it.ID] = true
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for id := range initial {
		if !seen[id] {
			t.Fatalf("item %d, there from the start, was never listed (%d pages, %d items)", id, pages, len(seen))
		}
	}
	if pages < 500/37 {
		t.Fatalf("%d pages for %d items", pages, len(seen))
	}
}

func TestQueueControl(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := jobq.New(jobq.Options{}).Enqueue(ctx, e.pool, jobq.Job{Queue: "mail", Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	var st queueState
	e.must(200, "POST", "/v1/queues/job_runs/mail/pause", e.admin, map[string]any{"reason": "deploy"}).decode(t, &st)
	if !*st.Paused || !*st.Changed {
		t.Fatalf("pause: %+v", st)
	}
	// Pausing again changes nothing; no body is fine.
	e.must(200, "POST", "/v1/queues/job_runs/mail/pause", e.admin, nil).decode(t, &st)
	if *st.Changed {
		t.Fatalf("second pause: %+v", st)
	}
	paused, err := lease.Paused(ctx, e.pool)
	if err != nil || len(paused) != 1 || paused[0].PausedBy != "api:ops" || paused[0].Reason != "deploy" {
		t.Fatalf("paused: %+v %v", paused, err)
	}
	e.must(200, "PUT", "/v1/queues/job_runs/mail/limit", e.admin, map[string]any{"limit": 7})
	var list struct{ Queues []map[string]any }
	e.must(200, "GET", "/v1/queues", e.read, nil).decode(t, &list)
	if len(list.Queues) != 1 || list.Queues[0]["paused"] != true || list.Queues[0]["limit"] != float64(7) || list.Queues[0]["ready"] != float64(1) {
		t.Fatalf("queues: %+v", list)
	}
	e.must(200, "POST", "/v1/queues/job_runs/mail/resume", e.admin, nil).decode(t, &st)
	if *st.Paused || !*st.Changed {
		t.Fatalf("resume: %+v", st)
	}
	e.must(200, "DELETE", "/v1/queues/job_runs/mail/limit", e.admin, nil)
	e.must(200, "GET", "/v1/queues", e.read, nil).decode(t, &list)
	if list.Queues[0]["paused"] != false || list.Queues[0]["limit"] != nil {
		t.Fatalf("queues after resume: %+v", list)
	}
	e.must(404, "POST", "/v1/queues/nosuch/mail/pause", e.admin, nil)
}

func TestSchedulesCRUD(t *testing.T) {
	e := newEnv(t)
	var sc map[string]any
	e.must(201, "POST", "/v1/schedules", e.admin, map[string]any{"name": "nightly", "cron": "0 3 * * *", "timezone": "Europe/Berlin",
		"kind": "report.build", "payload": map[string]any{"full": true}, "overlap": "skip", "enabled": false}).decode(t, &sc)
	if sc["enabled"] != false || sc["timezone"] != "Europe/Berlin" || sc["queue"] != "default" {
		t.Fatalf("created: %+v", sc)
	}
	if r := e.must(409, "POST", "/v1/schedules", e.admin, map[string]any{"name": "nightly", "cron": "@daily", "kind": "k"}); r.err(t).Code != CodeConflict {
		t.Fatalf("exists: %s", r.body)
	}
	e.must(200, "POST", "/v1/schedules/nightly/enable", e.admin, nil).decode(t, &sc)
	if sc["enabled"] != true || sc["next_run_at"] == nil {
		t.Fatalf("enabled: %+v", sc)
	}
	e.must(200, "PATCH", "/v1/schedules/nightly", e.admin, map[string]any{"cron": "@hourly", "queue": "reports"}).decode(t, &sc)
	if sc["cron"] != "@hourly" || sc["queue"] != "reports" {
		t.Fatalf("updated: %+v", sc)
	}
	var tr struct {
		RunID int64 `json:"run_id"`
	}
	e.must(201, "POST", "/v1/schedules/nightly/trigger", e.admin, nil).decode(t, &tr)
	if tr.RunID == 0 {
		t.Fatal("no run")
	}
	// Overlap skip: a second trigger while the run is live is a conflict, unless forced.
	e.must(409, "POST", "/v1/schedules/nightly/trigger", e.admin, nil)
	e.must(201, "POST", "/v1/schedules/nightly/trigger", e.admin, map[string]any{"force": true})
	var got itemWithAttempts
	e.must(200, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d", tr.RunID), e.read, nil).decode(t, &got)
	if got.Item.Kind != "report.build" || got.Item.Queue != "reports" {
		t.Fatalf("triggered run: %+v", got.Item)
	}
	e.must(200, "POST", "/v1/schedules/nightly/disable", e.admin, nil).decode(t, &sc)
	if sc["enabled"] != false {
		t.Fatalf("disabled: %+v", sc)
	}
	var list struct{ Schedules []map[string]any }
	e.must(200, "GET", "/v1/schedules", e.read, nil).decode(t, &list)
	if len(list.Schedules) != 1 {
		t.Fatalf("list: %+v", list)
	}
	e.must(200, "GET", "/v1/schedules/nightly", e.read, nil)
	e.must(200, "DELETE", "/v1/schedules/nightly", e.admin, nil)
	e.must(404, "GET", "/v1/schedules/nightly", e.read, nil)
	e.must(404, "DELETE", "/v1/schedules/nightly", e.admin, nil)
}

func TestReadyz(t *testing.T) {
	e := newEnv(t)
	advance := freezeReady(e.srv)
	var h health
	e.must(200, "GET", "/readyz", "", nil).decode(t, &h)
	if h.Status != "ready" || h.SchemaVersion == 0 {
		t.Fatalf("ready: %+v", h)
	}
	e.must(200, "GET", "/healthz", "", nil)
	// An old schema: the newest migration is not applied.
	if _, err := e.pool.Exec(context.Background(),
		`delete from workq.workq_migrations where version_id = (select max(version_id) from workq.workq_migrations)`); err != nil {
		t.Fatal(err)
	}
	// The answer serves for a second (readyTTL): the change shows after it.
	e.must(200, "GET", "/readyz", "", nil)
	advance(readyTTL)
	e.must(503, "GET", "/readyz", "", nil).decode(t, &h)
	if h.Status != "unavailable" || !strings.Contains(h.Error, "migrate up") {
		t.Fatalf("old schema: %+v", h)
	}
	// Operator endpoints say to migrate too.
	if r := e.must(503, "GET", "/v1/queues", e.read, nil); !strings.Contains(r.err(t).Message, "migrate up") {
		t.Fatalf("queues on an old schema: %s", r.body)
	}
}

func TestMetricsMounted(t *testing.T) {
	e := newEnv(t, func(o *setup) {
		o.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintln(w, "workq_up 1")
		})
	})
	if r := e.must(200, "GET", "/metrics", e.read, nil); string(r.body) != "workq_up 1\n" {
		t.Fatalf("metrics: %q", r.body)
	}
	e.must(401, "GET", "/metrics", "", nil)
	// Without a handler there is no /metrics.
	e2 := newEnv(t)
	e2.skipValidate = true
	e2.must(404, "GET", "/metrics", e2.read, nil)
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	document(t) // well formed and valid
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				inDoc[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	inRoutes := map[string]bool{}
	for _, rt := range routes() {
		key := rt.method + " " + rt.path
		if inRoutes[key] {
			t.Errorf("route %s registered twice", key)
		}
		inRoutes[key] = true
		if !inDoc[key] {
			t.Errorf("route %s is not in openapi.json", key)
		}
	}
	for key := range inDoc {
		if !inRoutes[key] {
			t.Errorf("openapi.json has %s, which is no route", key)
		}
	}
	// Every route needing no token is marked so in the document, and the others are not.
	var full map[string]map[string]map[string]any
	if err := json.Unmarshal(mustField(t, openAPIDocument, "paths"), &full); err != nil {
		t.Fatal(err)
	}
	for _, rt := range routes() {
		op := full[rt.path][strings.ToLower(rt.method)]
		sec, has := op["security"]
		open := has && len(sec.([]any)) == 0
		if open != (rt.scope == scopeNone) {
			t.Errorf("%s %s: scope %q but the document's security is %v", rt.method, rt.path, rt.scope, sec)
		}
	}
	// The server serves the same document.
	e := newEnv(t)
	if r := e.must(200, "GET", "/openapi.json", "", nil); string(r.body) != string(openAPIDocument) {
		t.Fatal("served document differs from the embedded one")
	}
}

func mustField(t *testing.T, doc []byte, name string) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}

// TestBodyLimitWithoutContentLength: a chunked body (no Content-Length) is
// cut at the limit while it is read, also when the JSON value fits and
// what follows it does not.
func TestBodyLimitWithoutContentLength(t *testing.T) {
	e := newEnv(t, func(o *setup) { o.MaxBodyBytes = 4096 })
	for name, body := range map[string]string{
		"value over the limit":     `{"kind":"k","payload":{"x":"` + strings.Repeat("a", 8000) + `"}}`,
		"trailing data over limit": `{"kind":"k"}` + strings.Repeat(" ", 8000),
	} {
		t.Run(name, func(t *testing.T) {
			before := snapshot(t, e.pool)
			// A reader of unknown length: the client sends it chunked.
			req, err := http.NewRequest("POST", e.http.URL+"/v1/jobs", io.MultiReader(strings.NewReader(body)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+e.admin)
			res, err := e.http.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if req.ContentLength != 0 || res.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("content length %d: status %d, want 413: %s", req.ContentLength, res.StatusCode, b)
			}
			checkAgainstDocument(t, req, nil, response{status: res.StatusCode, header: res.Header, body: b})
			if snapshot(t, e.pool) != before {
				t.Fatal("an oversized request changed the database")
			}
		})
	}
}

// Metadata goes in with a job and comes back with its item; unique jobs
// return the run that holds their key; both are validated strictly.
func TestEnqueueMetadataAndUnique(t *testing.T) {
	e := newEnv(t)
	var one jobResult
	e.must(201, "POST", "/v1/jobs", e.admin, map[string]any{"kind": "email.send", "metadata": map[string]string{"tenant": "acme", "request_id": "r-1"},
		"unique": map[string]any{"by_args": true, "by_period": "1h", "by_states": []string{"ready", "in_progress", "done"}}}).decode(t, &one)
	var got itemWithAttempts
	e.must(200, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d", one.ID), e.read, nil).decode(t, &got)
	if got.Item.Metadata["tenant"] != "acme" || got.Item.Metadata["request_id"] != "r-1" || len(got.Item.Metadata) != 2 {
		t.Fatalf("metadata: %+v", got.Item.Metadata)
	}
	if got.Item.Details["unique_states"] != "ready,in_progress,done" || got.Item.Details["unique_key"] == nil {
		t.Fatalf("unique details: %+v", got.Item.Details)
	}
	var dup jobResult
	e.must(200, "POST", "/v1/jobs", e.admin, map[string]any{"kind": "email.send", "unique": map[string]any{"by_args": true, "by_period": "1h"}}).decode(t, &dup)
	if !dup.Duplicate || dup.ID != one.ID {
		t.Fatalf("unique: %+v vs %+v", dup, one)
	}
	var batch items[jobResult]
	e.must(201, "POST", "/v1/jobs/batch", e.admin, map[string]any{"items": []any{
		map[string]any{"kind": "email.send", "unique": map[string]any{"by_args": true, "by_period": "1h"}},
		map[string]any{"kind": "other", "metadata": map[string]string{"k": "v"}},
	}}).decode(t, &batch)
	if !batch.Items[0].Duplicate || batch.Items[0].ID != one.ID || batch.Items[1].Duplicate {
		t.Fatalf("batch: %+v", batch)
	}
	for _, c := range []struct {
		name, path string
		body       any
		want       string
		field      string
	}{
		{"metadata not an object", "/v1/jobs", raw(`{"kind":"k","metadata":["a"]}`), "want", "metadata"},
		{"metadata value not a string", "/v1/jobs", raw(`{"kind":"k","metadata":{"n":1}}`), "want a string", "metadata"},
		{"metadata empty key", "/v1/jobs", raw(`{"kind":"k","metadata":{"":"v"}}`), "metadata key", "metadata"},
		{"metadata too large", "/v1/jobs", map[string]any{"kind": "k", "metadata": map[string]string{"k": strings.Repeat("v", 70000)}}, "more than 65536", "metadata"},
		{"metadata in a batch", "/v1/jobs/batch", map[string]any{"items": []any{map[string]any{"kind": "k"}, map[string]any{"kind": "k", "metadata": map[string]string{strings.Repeat("k", 200): "v"}}}}, "metadata key", "items[1].metadata"},
		{"unique empty", "/v1/jobs", raw(`{"kind":"k","unique":{}}`), "at least one", "unique"},
		{"unique short period", "/v1/jobs", raw(`{"kind":"k","unique":{"by_period":"10ms"}}`), "shorter than 1s", "unique.by_period"},
		{"unique bad period", "/v1/jobs", raw(`{"kind":"k","unique":{"by_period":"hourly"}}`), "not a duration", "unique.by_period"},
		{"unique unknown state", "/v1/jobs", raw(`{"kind":"k","unique":{"by_states":["ready","in_progress","gone"]}}`), "unknown state", "unique.by_states"},
		{"unique unknown field", "/v1/jobs", raw(`{"kind":"k","unique":{"by_kind":true}}`), "unknown field", "by_kind"}, // encoding/json names no parent
		{"unique with a dedup key", "/v1/jobs", raw(`{"kind":"k","dedup_key":"d","unique":{"by_args":true}}`), "not both", "unique"},
		{"batch mixing", "/v1/jobs/batch", raw(`{"items":[{"kind":"k","dedup_key":"d"},{"kind":"k","unique":{"by_args":true}}]}`), "one or the other", "items[1].unique"},
	} {
		r := e.do("POST", c.path, e.admin, c.body)
		var body struct {
			Error string `json:"error"`
			Field string `json:"field"`
		}
		_ = json.Unmarshal(r.body, &body)
		if r.status != 400 || !strings.Contains(body.Error, c.want) || body.Field != c.field {
			t.Errorf("%s: %d %s; want 400 with %q, field %q", c.name, r.status, r.body, c.want, c.field)
		}
	}
}

// Cancelling a running item requests it (requested in the answer, which the
// OpenAPI document describes); its status filter and counts say cancelled
// once its attempt ends.
func TestCancelRunningItem(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, err := jobq.New(jobq.Options{}).Enqueue(ctx, e.pool, jobq.Job{Queue: "mail", Kind: "email.send"})
	if err != nil {
		t.Fatal(err)
	}
	eng := lease.New(e.pool, lease.JobRuns)
	it, ok, err := eng.ClaimByID(ctx, r.ID, time.Minute, "w1")
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	var res struct{ Applied, Skipped, Requested []int64 }
	e.must(200, "POST", "/v1/tables/job_runs/items/cancel", e.admin, map[string]any{"ids": []int64{r.ID}}).decode(t, &res)
	if fmt.Sprint(res.Applied) != fmt.Sprint([]int64{r.ID}) || fmt.Sprint(res.Requested) != fmt.Sprint([]int64{r.ID}) {
		t.Fatalf("cancel of a running item: %+v", res)
	}
	if _, err := eng.Complete(ctx, []lease.Completion{{ID: r.ID, Token: it.OwnerToken, Outcome: lease.Done}}); err != nil {
		t.Fatal(err)
	}
	var page struct {
		Items []struct {
			ID     int64
			Status string
		}
	}
	e.must(200, "GET", "/v1/tables/job_runs/items?status=cancelled", e.read, nil).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].ID != r.ID || page.Items[0].Status != "cancelled" {
		t.Fatalf("cancelled items: %+v", page)
	}
}

// A retry's answer tells the ids that do not exist from those in another
// state, and a done item shows no error of its earlier attempts but in its
// attempts; a failed one keeps its error and ended when it failed.
func TestRetryAnswerAndFinishedItems(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := jobq.New(jobq.Options{})
	r, err := c.Enqueue(ctx, e.pool, jobq.Job{Queue: "mail", Kind: "email.send", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	done := r.ID
	eng := lease.New(e.pool, lease.JobRuns)
	for _, out := range []lease.Outcome{lease.Retry, lease.Done} {
		it, ok, err := eng.ClaimByID(ctx, done, time.Minute, "w1")
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if _, err := eng.Complete(ctx, []lease.Completion{{ID: done, Token: it.OwnerToken, Outcome: out, Error: "smtp timeout"}}); err != nil {
			t.Fatal(err)
		}
	}
	var res struct {
		Applied, Skipped []int64
		NotFound         []int64 `json:"not_found"`
		States           map[string]string
	}
	body := e.must(200, "POST", "/v1/tables/job_runs/items/retry", e.admin, map[string]any{"ids": []int64{done, 999999}})
	body.decode(t, &res)
	if len(res.Applied) != 0 || fmt.Sprint(res.Skipped) != fmt.Sprint([]int64{done, 999999}) || fmt.Sprint(res.NotFound) != "[999999]" ||
		res.States[fmt.Sprint(done)] != "done" || len(res.States) != 1 {
		t.Fatalf("retry of a done and a missing job: %s", body.body)
	}
	var got itemWithAttempts
	e.must(200, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d", done), e.read, nil).decode(t, &got)
	if got.Item.Status != "done" || got.Item.LastError != "" || len(got.Attempts) != 2 || got.Attempts[0].Error != "smtp timeout" {
		t.Fatalf("done item: %+v attempts %+v; want no last_error, the error in its first attempt", got.Item, got.Attempts)
	}
}
