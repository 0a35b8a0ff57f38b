package api

import (
	"context"
	"strconv"
	"testing"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/migrate"
)

// An API on another schema than the default reads and writes that schema
// only: it lists the jobs it enqueued, not those of the default schema in
// the same database, and it is ready when that schema is current.
func TestAPIOnAnotherSchema(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, func(o *setup) {
		m, err := migrate.New(o.pool, migrate.Options{Schema: "api_two"})
		if err == nil {
			_, err = m.Up(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		o.config.Schema = "api_two"
	})
	if _, err := jobq.New(jobq.Options{}).Enqueue(ctx, e.pool, jobq.Job{Kind: "in.default"}); err != nil {
		t.Fatal(err)
	}
	var res jobResult
	e.must(201, "POST", "/v1/jobs", e.admin, map[string]any{"kind": "in.two"}).decode(t, &res)
	var page listPage
	e.must(200, "GET", "/v1/tables/job_runs/items", e.read, nil).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].Kind != "in.two" || page.Items[0].ID != res.ID {
		t.Fatalf("the API on api_two lists %+v, want only its job %d", page.Items, res.ID)
	}
	e.must(200, "GET", "/v1/tables/job_runs/items/"+strconv.FormatInt(res.ID, 10), e.read, nil)
	e.must(200, "GET", "/readyz", "", nil)
	var n int
	if err := e.pool.QueryRow(ctx, `select count(*) from api_two.job_runs where kind = 'in.two'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("api_two.job_runs holds %d jobs of the API (%v), want 1", n, err)
	}

	if _, err := New(nil, Options{Insecure: true}); err == nil {
		t.Fatal("New without a Client: no error")
	}
}
