package api

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/workq/workq"
)

// TestItemWaitsFor: a ready job's item carries waits_for while flow
// control holds it (a paused kind), and none once it does not; the
// response matches the OpenAPI document.
func TestItemWaitsFor(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := testClient(t, e.pool, workq.Config{})
	var id int64
	if err := e.pool.QueryRow(ctx, `insert into workq.job_runs (queue, kind, payload) values ('fq', 'mail', '{}') returning id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	k := workq.KindRef{Table: workq.TableJobRuns, Queue: "fq", Kind: "mail"}
	if _, err := c.PauseKind(ctx, k, &workq.ActionOpts{Actor: "ops:ann"}); err != nil {
		t.Fatal(err)
	}
	var got itemWithAttempts
	path := fmt.Sprintf("/v1/tables/job_runs/items/%d", id)
	e.must(200, "GET", path, e.read, nil).decode(t, &got)
	if want := []string{"kind mail paused by ops:ann"}; !slices.Equal(got.WaitsFor, want) {
		t.Errorf("waits_for %q, want %q", got.WaitsFor, want)
	}
	if _, err := c.ResumeKind(ctx, k); err != nil {
		t.Fatal(err)
	}
	got = itemWithAttempts{}
	e.must(200, "GET", path, e.read, nil).decode(t, &got)
	if got.WaitsFor != nil {
		t.Errorf("after the resume: waits_for %q, want none", got.WaitsFor)
	}
}
