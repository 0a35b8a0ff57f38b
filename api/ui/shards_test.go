package ui_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/workq/workq/api"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/lease"
)

// A sharded dashboard lists the items of every shard, with their shard,
// reads an item on its shard, and acts on one shard's items only.
func TestDashboardShowsEveryShard(t *testing.T) {
	second := testdb.Pool(t)
	s := newSite(t, func(o *api.Options) {
		o.Shards = []api.Shard{{Name: "eu", DB: o.DB}, {Name: "us", DB: second}}
	})
	euIDs := enqueue(t, s.pool, jobq.Job{Kind: "eu.kind"})
	usIDs := enqueue(t, second, jobq.Job{Kind: "us.kind"})
	b := s.browser()
	b.login(s.admin)
	p := b.get("/ui/items/job_runs")
	must(t, p, 200, "eu.kind", "us.kind", `<option value="us"`, "Choose a shard in the filter",
		"items/job_runs/"+itoa(usIDs[0])+"?shard=us", "items/job_runs/"+itoa(euIDs[0])+"?shard=eu")
	if strings.Contains(p.body, `name="id"`) {
		t.Error("the merged list offers a selection to act on")
	}
	p = b.get("/ui/items/job_runs?shard=us")
	must(t, p, 200, "us.kind", `name="shard" value="us"`, `name="id" value="`+itoa(usIDs[0])+`"`)
	if strings.Contains(p.body, "eu.kind") {
		t.Error("shard us lists shard eu's item")
	}
	must(t, b.get("/ui/items/job_runs/"+itoa(usIDs[0])+"?shard=us"), 200, "us.kind", `name="shard" value="us"`)
	must(t, b.get("/ui/items/job_runs/"+itoa(usIDs[0])), 400, "?shard=NAME")
	must(t, b.get("/ui/items/job_runs/"+itoa(usIDs[0])+"?shard=mars"), 404)
	// Cancel on shard us.
	form := url.Values{"action": {"cancel"}, "id": {itoa(usIDs[0])}, "shard": {"us"}, "confirm": {"yes"}, "back": {"items/job_runs?shard=us"}}
	must(t, b.post("/ui/items/job_runs/act", form), 303)
	var st int16
	if err := second.QueryRow(context.Background(), "select status from workq.job_runs where id = $1", usIDs[0]).Scan(&st); err != nil ||
		lease.Status(st) != lease.StatusCancelled {
		t.Fatalf("us item status %d (%v), want cancelled", st, err)
	}
	form.Del("shard")
	must(t, b.post("/ui/items/job_runs/act", form), 400, "one shard")
}
