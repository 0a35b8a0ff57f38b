package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A job's limit_key is taken by the job ingest (one job and a batch),
// shown in the item's details, and a bad one is a 400 naming it that
// writes nothing (a batch with one: none of its jobs).
func TestEnqueueLimitKey(t *testing.T) {
	e := newEnv(t)
	var one jobResult
	e.must(201, "POST", "/v1/jobs", e.admin, map[string]any{"kind": "report", "limit_key": "tenant-a"}).decode(t, &one)
	var got itemWithAttempts
	e.must(200, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d", one.ID), e.read, nil).decode(t, &got)
	if got.Item.Details["limit_key"] != "tenant-a" {
		t.Fatalf("details %+v: want limit_key tenant-a", got.Item.Details)
	}
	var batch items[jobResult]
	e.must(201, "POST", "/v1/jobs/batch", e.admin, map[string]any{"items": []any{
		map[string]any{"kind": "report", "limit_key": "tenant-b"}, map[string]any{"kind": "report"},
	}}).decode(t, &batch)
	for i, want := range []string{"tenant-b", ""} {
		var k *string
		if err := e.pool.QueryRow(context.Background(), "select limit_key from workq.job_runs_all where id = $1", batch.Items[i].ID).Scan(&k); err != nil {
			t.Fatal(err)
		}
		if (k == nil) != (want == "") || k != nil && *k != want {
			t.Fatalf("batch item %d: limit_key %v, want %q (null for none)", i, k, want)
		}
	}
	count := func() int {
		var n int
		if err := e.pool.QueryRow(context.Background(), "select count(*) from workq.job_runs_all").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	for _, c := range []struct {
		name, path string
		body       any
		want       string
		field      string
	}{
		{"too long", "/v1/jobs", map[string]any{"kind": "k", "limit_key": strings.Repeat("k", 257)}, "longer than 256", "limit_key"},
		{"NUL", "/v1/jobs", raw(`{"kind":"k","limit_key":"a\u0000b"}`), "not valid UTF-8", "limit_key"},
		{"not a string", "/v1/jobs", raw(`{"kind":"k","limit_key":7}`), "want", "limit_key"},
		{"in a batch", "/v1/jobs/batch", map[string]any{"items": []any{map[string]any{"kind": "k", "limit_key": "ok"},
			map[string]any{"kind": "k", "limit_key": strings.Repeat("k", 300)}}}, "longer than 256", "items[1].limit_key"},
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
	if n := count(); n != before {
		t.Fatalf("%d jobs written by refused requests", n-before)
	}
}
