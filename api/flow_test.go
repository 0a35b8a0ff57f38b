package api

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// TestFlowAPI: every flow-control endpoint through the real server, its
// answers checked against openapi.json (env.do), and what it wrote read
// back through GET /v1/flow.
func TestFlowAPI(t *testing.T) {
	e := newEnv(t)
	var st flowStatus
	e.must(200, "GET", "/v1/flow", e.read, nil).decode(t, &st)
	if len(st.Queues)+len(st.Limits)+len(st.PausedKinds)+len(st.Throttles) != 0 {
		t.Fatalf("a new database has flow control: %+v", st)
	}
	if r := e.must(200, "GET", "/v1/flow", e.read, nil); !strings.Contains(string(r.body), `"queues":[]`) {
		t.Fatalf("empty lists are not [] : %s", r.body)
	}

	var rule flowRule
	e.must(200, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "job_runs", "queue": "mail", "kind": "send",
		"rate": 10, "period": "1m", "concurrency": 3}).decode(t, &rule)
	if rule != (flowRule{Table: "job_runs", Queue: "mail", Kind: "send", Rate: 10, Period: "1m0s", Concurrency: 3}) {
		t.Fatalf("set: %+v", rule)
	}
	rule = flowRule{}
	e.must(200, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "job_runs", "queue": "mail", "per_key": true, "concurrency": 2}).decode(t, &rule)
	if rule.Period != "" || !rule.PerKey || rule.Concurrency != 2 {
		t.Fatalf("set per key: %+v", rule)
	}
	// A rate without a period is per second.
	e.must(200, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "timers", "queue": "t", "rate": 5}).decode(t, &rule)
	if rule.Period != "1s" {
		t.Fatalf("rate without a period: %+v", rule)
	}

	var fair fairState
	e.must(200, "PUT", "/v1/queues/job_runs/mail/fair", e.admin, map[string]any{"fair": true}).decode(t, &fair)
	if !fair.Fair || fair.Queue != "mail" {
		t.Fatalf("fair: %+v", fair)
	}
	var ks kindState
	e.must(200, "POST", "/v1/queues/job_runs/mail/kinds/send/pause", e.admin, map[string]any{"reason": "provider down"}).decode(t, &ks)
	if !ks.Paused || !ks.Changed || ks.Kind != "send" {
		t.Fatalf("pause kind: %+v", ks)
	}
	e.must(200, "POST", "/v1/queues/job_runs/mail/kinds/send/pause", e.admin, nil).decode(t, &ks)
	if ks.Changed {
		t.Fatalf("second pause changed: %+v", ks)
	}

	e.must(200, "GET", "/v1/flow", e.read, nil).decode(t, &st)
	if len(st.Queues) != 2 || st.Queues[0].Queue != "mail" || !st.Queues[0].Fair || st.Queues[1].Table != "timers" {
		t.Fatalf("queues: %+v", st.Queues)
	}
	if len(st.Limits) != 3 {
		t.Fatalf("limits: %+v", st.Limits)
	}
	var send, perKey *flowLimitRow
	for i, l := range st.Limits {
		switch {
		case l.Kind == "send":
			send = &st.Limits[i]
		case l.PerKey:
			perKey = &st.Limits[i]
		}
	}
	if send == nil || send.Rate != 10 || send.Period != "1m0s" || send.Concurrency != 3 || send.UpdatedAt.IsZero() || perKey == nil || perKey.Concurrency != 2 {
		t.Fatalf("limits: %+v", st.Limits)
	}
	if len(st.PausedKinds) != 1 || st.PausedKinds[0].Kind != "send" || st.PausedKinds[0].PausedBy != "api:ops" || st.PausedKinds[0].Reason != "provider down" {
		t.Fatalf("paused kinds: %+v", st.PausedKinds)
	}

	e.must(200, "POST", "/v1/queues/job_runs/mail/kinds/send/resume", e.admin, nil).decode(t, &ks)
	if ks.Paused || !ks.Changed {
		t.Fatalf("resume kind: %+v", ks)
	}
	e.must(200, "PUT", "/v1/queues/job_runs/mail/fair", e.admin, map[string]any{"fair": false})

	var rm flowRemoved
	e.must(200, "DELETE", "/v1/flow/limits?table=job_runs&queue=mail&kind=send", e.admin, nil).decode(t, &rm)
	if !rm.Removed || rm.Kind != "send" {
		t.Fatalf("remove: %+v", rm)
	}
	// Removing it again is no error: removed is false, nothing changed.
	before := snapshot(t, e.pool)
	e.must(200, "DELETE", "/v1/flow/limits?table=job_runs&queue=mail&kind=send", e.admin, nil).decode(t, &rm)
	if rm.Removed {
		t.Fatalf("second remove: %+v", rm)
	}
	if snapshot(t, e.pool) != before {
		t.Fatal("removing an absent rule changed the database")
	}
	e.must(200, "DELETE", "/v1/flow/limits?table=job_runs&queue=mail&per_key=true", e.admin, nil).decode(t, &rm)
	if !rm.Removed || !rm.PerKey {
		t.Fatalf("remove per key: %+v", rm)
	}
	e.must(200, "GET", "/v1/flow", e.read, nil).decode(t, &st)
	if len(st.Limits) != 1 || st.Limits[0].Table != "timers" || len(st.PausedKinds) != 0 {
		t.Fatalf("after removes: %+v", st)
	}
}

// TestFlowAPIRefusesInvalid: every invalid request is a 400 (or 404 for
// an unknown table or shard) in the API's error shape, naming the field
// when one is wrong, and writes nothing.
func TestFlowAPIRefusesInvalid(t *testing.T) {
	e := newEnv(t)
	e.must(200, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "job_runs", "queue": "q", "rate": 1})
	base := func(mod map[string]any) map[string]any {
		m := map[string]any{"table": "job_runs", "queue": "q", "kind": "k", "rate": 5}
		for k, v := range mod {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	cases := []struct {
		name, method, path string
		body               any
		status             int
		field              string
	}{
		{"no rate, no concurrency", "PUT", "/v1/flow/limits", base(map[string]any{"rate": nil}), 400, "rate"},
		{"negative rate", "PUT", "/v1/flow/limits", base(map[string]any{"rate": -1}), 400, "rate"},
		{"rate out of range", "PUT", "/v1/flow/limits", base(map[string]any{"rate": int64(1) << 40}), 400, "rate"},
		{"negative concurrency", "PUT", "/v1/flow/limits", base(map[string]any{"concurrency": -2}), 400, "concurrency"},
		{"period not a duration", "PUT", "/v1/flow/limits", base(map[string]any{"period": "soon"}), 400, "period"},
		{"period not whole milliseconds", "PUT", "/v1/flow/limits", base(map[string]any{"period": "1500us"}), 400, "period"},
		{"period over a day", "PUT", "/v1/flow/limits", base(map[string]any{"period": "25h"}), 400, "period"},
		{"period without a rate", "PUT", "/v1/flow/limits", base(map[string]any{"rate": nil, "concurrency": 1, "period": "1m"}), 400, "period"},
		{"per key with a kind", "PUT", "/v1/flow/limits", base(map[string]any{"per_key": true}), 400, "kind"},
		{"per key on the outbox", "PUT", "/v1/flow/limits", base(map[string]any{"table": "outbox", "kind": nil, "per_key": true}), 400, "per_key"},
		{"a topic of the outbox", "PUT", "/v1/flow/limits", base(map[string]any{"table": "outbox"}), 400, "kind"},
		{"unknown table", "PUT", "/v1/flow/limits", base(map[string]any{"table": "jobs"}), 400, ""},
		{"no queue", "PUT", "/v1/flow/limits", base(map[string]any{"queue": nil}), 400, ""},
		{"queue with markup", "PUT", "/v1/flow/limits", base(map[string]any{"queue": "<b>q</b>"}), 400, ""},
		{"unknown field", "PUT", "/v1/flow/limits", base(map[string]any{"rates": 5}), 400, "rates"},
		{"rate a string", "PUT", "/v1/flow/limits", base(map[string]any{"rate": "5"}), 400, "rate"},
		{"unknown shard", "PUT", "/v1/flow/limits", base(map[string]any{"shard": "eu"}), 404, ""},
		{"empty body", "PUT", "/v1/flow/limits", raw(""), 400, ""},
		{"query on put", "PUT", "/v1/flow/limits?x=1", base(nil), 400, "x"},
		{"remove without a queue", "DELETE", "/v1/flow/limits?table=job_runs", nil, 400, ""},
		{"remove per_key not a bool", "DELETE", "/v1/flow/limits?table=job_runs&queue=q&per_key=yes", nil, 400, "per_key"},
		{"remove unknown parameter", "DELETE", "/v1/flow/limits?table=job_runs&queue=q&rate=1", nil, 400, "rate"},
		{"fair without fair", "PUT", "/v1/queues/job_runs/q/fair", map[string]any{}, 400, "fair"},
		{"fair not a bool", "PUT", "/v1/queues/job_runs/q/fair", map[string]any{"fair": "yes"}, 400, "fair"},
		{"fair of the outbox", "PUT", "/v1/queues/outbox/q/fair", map[string]any{"fair": true}, 400, "table"},
		{"fair of an unknown table", "PUT", "/v1/queues/jobs/q/fair", map[string]any{"fair": true}, 404, ""},
		{"pause kind reason too long", "POST", "/v1/queues/job_runs/q/kinds/k/pause", map[string]any{"reason": strings.Repeat("r", 1025)}, 400, ""},
		{"pause kind with a bad queue", "POST", "/v1/queues/job_runs/" + url.PathEscape("q q") + "/kinds/k/pause", nil, 400, ""},
		{"pause kind too long", "POST", "/v1/queues/job_runs/q/kinds/" + strings.Repeat("k", 257) + "/pause", nil, 400, "kind"},
		{"resume kind with a body", "POST", "/v1/queues/job_runs/q/kinds/k/resume", map[string]any{"reason": "x"}, 400, "reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, e.pool)
			r := e.do(c.method, c.path, e.admin, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			er := r.err(t)
			t.Logf("%d %s", r.status, er.Message)
			if er.Message == "" || er.Code != map[int]string{400: CodeInvalid, 404: CodeNotFound}[c.status] {
				t.Errorf("error %+v", er)
			}
			if c.field != "" && er.Field != c.field {
				t.Errorf("field %q, want %q (%s)", er.Field, c.field, er.Message)
			}
			if snapshot(t, e.pool) != before {
				t.Error("a refused request changed the database")
			}
		})
	}
}

// TestFlowAPIWritesNeedAdmin: the flow writes go through the same checks
// as every write: no token 401, a read token 403, a cross-site browser
// request 403; none writes anything. GET /v1/flow takes a read token.
func TestFlowAPIWritesNeedAdmin(t *testing.T) {
	e := newEnv(t)
	writes := []struct {
		method, path string
		body         any
	}{
		{"PUT", "/v1/flow/limits", map[string]any{"table": "job_runs", "queue": "q", "rate": 1}},
		{"DELETE", "/v1/flow/limits?table=job_runs&queue=q", nil},
		{"PUT", "/v1/queues/job_runs/q/fair", map[string]any{"fair": true}},
		{"POST", "/v1/queues/job_runs/q/kinds/k/pause", nil},
		{"POST", "/v1/queues/job_runs/q/kinds/k/resume", nil},
	}
	// Something to remove and to resume, so that a write let through
	// would change the database.
	e.must(200, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "job_runs", "queue": "q", "concurrency": 4})
	e.must(200, "POST", "/v1/queues/job_runs/q/kinds/k/pause", e.admin, nil)
	before := snapshot(t, e.pool)
	for _, w := range writes {
		if r := e.do(w.method, w.path, "", w.body); r.status != 401 || r.err(t).Code != CodeUnauthorized {
			t.Errorf("%s %s without a token: %d %s", w.method, w.path, r.status, r.body)
		}
		if r := e.do(w.method, w.path, e.read, w.body); r.status != 403 || r.err(t).Code != CodeForbidden {
			t.Errorf("%s %s with a read token: %d %s", w.method, w.path, r.status, r.body)
		}
		r := e.do(w.method, w.path, e.admin, w.body, "Origin", "http://attacker.example", "Sec-Fetch-Site", "cross-site")
		if r.status != 403 || r.err(t).Code != CodeForbidden {
			t.Errorf("%s %s cross-site: %d %s", w.method, w.path, r.status, r.body)
		}
	}
	if snapshot(t, e.pool) != before {
		t.Fatal("a refused write changed the database")
	}
	if r := e.do("GET", "/v1/flow", "", nil); r.status != 401 {
		t.Fatalf("GET /v1/flow without a token: %d", r.status)
	}
	e.must(200, "GET", "/v1/flow", e.read, nil)
}

// TestFlowAPIMarkupAndSQLInNames: a kind is free text (up to 256 bytes),
// so one made of HTML and SQL is stored as it is, through parameters, and
// returned JSON-escaped: no markup in the body, no statement run, the
// same string read back. A queue name is a name: markup in it is refused.
func TestFlowAPIMarkupAndSQLInNames(t *testing.T) {
	e := newEnv(t)
	const evil = `<script>alert("x")</script>'; drop table job_runs; --&`
	path := "/v1/queues/job_runs/q/kinds/" + url.PathEscape(evil)
	var ks kindState
	// The kind's "/" is %2F in its path segment, which the document's
	// router (it matches the unescaped path) cannot follow: these two
	// answers are checked here instead.
	e.skipValidate = true
	e.must(200, "POST", path+"/pause", e.admin, map[string]any{"reason": "<img src=x onerror=alert(1)>"}).decode(t, &ks)
	if ks.Kind != evil || !ks.Changed {
		t.Fatalf("pause: %+v", ks)
	}
	e.must(200, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "job_runs", "queue": "q", "kind": evil, "rate": 3})
	r := e.must(200, "GET", "/v1/flow", e.read, nil)
	for _, bad := range []string{"<script>", "<img", "&"} {
		if strings.Contains(string(r.body), bad) {
			t.Errorf("GET /v1/flow has %q unescaped: %s", bad, r.body)
		}
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("Content-Type %q, X-Content-Type-Options %q", ct, r.header.Get("X-Content-Type-Options"))
	}
	var st flowStatus
	r.decode(t, &st)
	if len(st.PausedKinds) != 1 || st.PausedKinds[0].Kind != evil || st.PausedKinds[0].Reason != "<img src=x onerror=alert(1)>" ||
		len(st.Limits) != 1 || st.Limits[0].Kind != evil {
		t.Fatalf("read back: %+v", st)
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), `select count(*) from workq.job_runs_all`).Scan(&n); err != nil {
		t.Fatalf("job_runs after the request: %v", err)
	}
	e.must(200, "POST", path+"/resume", e.admin, nil).decode(t, &ks)
	if !ks.Changed {
		t.Fatalf("resume: %+v", ks)
	}
	e.skipValidate = false
	var rm flowRemoved
	e.must(200, "DELETE", "/v1/flow/limits?table=job_runs&queue=q&kind="+url.QueryEscape(evil), e.admin, nil).decode(t, &rm)
	if !rm.Removed || rm.Kind != evil {
		t.Fatalf("remove: %+v", rm)
	}
	before := snapshot(t, e.pool)
	e.must(400, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "job_runs", "queue": "q'; drop table job_runs; --", "rate": 1})
	e.must(400, "POST", "/v1/queues/job_runs/"+url.PathEscape("<script>")+"/kinds/k/pause", e.admin, nil)
	if snapshot(t, e.pool) != before {
		t.Fatal("a refused name changed the database")
	}
}

// TestFlowAPIOnShards: on a sharded server a rule without a shard is set
// on every shard (split evenly unless per key), a rule with one on that
// shard only; the status has each shard's rows; a kind's pause is every
// shard's.
func TestFlowAPIOnShards(t *testing.T) {
	second := testdb.Pool(t)
	e := newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "a", Pool: o.pool}, {Name: "b", Pool: second}}
	})
	var rule flowRule
	e.must(200, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "job_runs", "queue": "q", "rate": 10, "concurrency": 4}).decode(t, &rule)
	if rule.Shard != "" || rule.Rate != 10 {
		t.Fatalf("set on every shard: %+v", rule)
	}
	beforeA := snapshot(t, e.pool)
	e.must(200, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "job_runs", "queue": "q", "kind": "k", "concurrency": 1, "shard": "b"}).decode(t, &rule)
	if rule.Shard != "b" {
		t.Fatalf("set on b: %+v", rule)
	}
	if snapshot(t, e.pool) != beforeA {
		t.Fatal("the rule of shard b reached a")
	}
	e.must(404, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "job_runs", "queue": "q", "rate": 1, "shard": "mars"})
	var ks kindState
	e.must(200, "POST", "/v1/queues/job_runs/q/kinds/k/pause", e.admin, nil).decode(t, &ks)
	if !ks.Changed {
		t.Fatalf("pause kind: %+v", ks)
	}
	var st flowStatus
	e.must(200, "GET", "/v1/flow", e.read, nil).decode(t, &st)
	var perShard = map[string][]flowLimitRow{}
	for _, l := range st.Limits {
		perShard[l.Shard] = append(perShard[l.Shard], l)
	}
	if len(perShard["a"]) != 1 || perShard["a"][0].Rate != 5 || perShard["a"][0].Concurrency != 2 || len(perShard["b"]) != 2 {
		t.Fatalf("limits: %+v", st.Limits)
	}
	if len(st.PausedKinds) != 2 || st.PausedKinds[0].Shard != "a" || st.PausedKinds[1].Shard != "b" {
		t.Fatalf("paused kinds: %+v", st.PausedKinds)
	}
	var rm flowRemoved
	e.must(200, "DELETE", "/v1/flow/limits?table=job_runs&queue=q&kind=k&shard=b", e.admin, nil).decode(t, &rm)
	if !rm.Removed || rm.Shard != "b" {
		t.Fatalf("remove on b: %+v", rm)
	}
}

// TestFlowAPIThrottles: a throttled scope is in GET /v1/flow with when
// its throttle ends, in the document's shape.
func TestFlowAPIThrottles(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.must(200, "PUT", "/v1/flow/limits", e.admin, map[string]any{"table": "job_runs", "queue": "q", "per_key": true, "concurrency": 1})
	if _, err := lease.Throttle(ctx, e.pool, lease.JobRuns, "q", "", "tenant-1", time.Hour); err != nil {
		t.Fatal(err)
	}
	var st flowStatus
	e.must(200, "GET", "/v1/flow", e.read, nil).decode(t, &st)
	if len(st.Throttles) != 1 || st.Throttles[0].Key != "tenant-1" || st.Throttles[0].Until == nil || time.Until(*st.Throttles[0].Until) < 50*time.Minute {
		t.Fatalf("throttles: %+v", st.Throttles)
	}
}
