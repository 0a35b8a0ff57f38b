package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// newShardedSite is a site over two migrated databases, shards eu (s.pool)
// and us (the pool returned).
func newShardedSite(t *testing.T, us *pgxpool.Pool, mod ...func(*siteSetup)) *site {
	t.Helper()
	return newSite(t, append([]func(*siteSetup){func(o *siteSetup) {
		o.pool = testdb.Pool(t)
		o.shards = []workq.Shard{{Name: "eu", Pool: o.pool}, {Name: "us", Pool: us}}
	}}, mod...)...)
}

// jobs enqueues n jobs of kind k.<shard> in queue q on pool.
func jobs(t *testing.T, pool *pgxpool.Pool, shard string, n int) []int64 {
	t.Helper()
	js := make([]jobq.Job, n)
	for i := range js {
		js[i] = jobq.Job{Queue: "q", Kind: "k." + shard}
	}
	return enqueue(t, pool, js...)
}

func statusOf(t *testing.T, pool *pgxpool.Pool, id int64) lease.Status {
	t.Helper()
	var st int16
	if err := pool.QueryRow(context.Background(), "select status from workq.job_runs_all where id = $1", id).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return lease.Status(st)
}

var itemLink = regexp.MustCompile(`href="\.\./items/job_runs/(\d+)\?shard=(\w+)">`)

// A dashboard over two shards lists the items of both, each with its
// shard, pages through all of them once, opens an item of the second
// shard and acts on it there only; an item without its shard, or of an
// unknown one, is refused and nothing changes.
func TestDashboardOverTwoShards(t *testing.T) {
	us := testdb.Pool(t)
	s := newShardedSite(t, us)
	euIDs, usIDs := jobs(t, s.pool, "eu", 30), jobs(t, us, "us", 30)
	if euIDs[0] != usIDs[0] {
		t.Fatalf("the two new databases should number their items alike: %d, %d", euIDs[0], usIDs[0])
	}
	id := usIDs[0] // an id both shards have
	b := s.browser()
	b.login(s.admin)

	// Every item of both shards once, over two pages of 50, each with its shard.
	seen := map[string]bool{}
	path := "/ui/items/job_runs"
	for pages := 0; path != ""; pages++ {
		if pages == 3 {
			t.Fatal("more than 2 pages of 60 items")
		}
		p := b.get(path)
		must(t, p, 200, `<th scope="col">Shard</th>`, `<option value="us" >us</option>`)
		for _, m := range itemLink.FindAllStringSubmatch(p.body, -1) {
			key := m[2] + ":" + m[1]
			if seen[key] {
				t.Fatalf("%s listed twice (page %d, %s):\n%s", key, pages, path, p.body)
			}
			seen[key] = true
			if !strings.Contains(p.body, `value="`+key+`"`) {
				t.Errorf("no checkbox %s", key)
			}
		}
		path = ""
		if m := regexp.MustCompile(`href="\.\./items/job_runs\?([^"]+)" rel="next"`).FindStringSubmatch(p.body); m != nil {
			path = "/ui/items/job_runs?" + strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	for _, ids := range []struct {
		shard string
		ids   []int64
	}{{"eu", euIDs}, {"us", usIDs}} {
		for _, id := range ids.ids {
			if !seen[fmt.Sprintf("%s:%d", ids.shard, id)] {
				t.Errorf("%s:%d never listed", ids.shard, id)
			}
		}
	}
	if len(seen) != 60 {
		t.Fatalf("listed %d items, want 60", len(seen))
	}
	// One shard by the filter.
	p := b.get("/ui/items/job_runs?shard=us")
	must(t, p, 200, "k.us", "Act on every item matching this filter</legend>")
	if strings.Contains(p.body, "k.eu") {
		t.Error("?shard=us lists an item of eu")
	}
	must(t, b.get("/ui/items/job_runs?shard=mars"), 404, "There is no shard &#34;mars&#34;")

	// An item is (shard, id).
	p = b.get("/ui/items/job_runs/" + itoa(id) + "?shard=us")
	must(t, p, 200, "<dt>Shard</dt><dd>us</dd>", "k.us", `<input type="hidden" name="shard" value="us">`, "Cancel…")
	must(t, b.get("/ui/items/job_runs/"+itoa(id)), 400, "Name the item&#39;s shard")
	must(t, b.get("/ui/items/job_runs/"+itoa(id)+"?shard=mars"), 404, "There is no shard")

	// Refused actions change nothing on either shard.
	for _, c := range []struct {
		name   string
		form   url.Values
		status int
	}{
		{"no shard", url.Values{"id": {itoa(id)}}, 400},
		{"unknown shard field", url.Values{"id": {itoa(id)}, "shard": {"mars"}}, 404},
		{"unknown shard in the id", url.Values{"id": {"us:" + itoa(usIDs[1]), "mars:" + itoa(id)}}, 404},
	} {
		form := c.form
		form.Set("action", "cancel")
		form.Set("confirm", "yes")
		must(t, b.post("/ui/items/job_runs/act", form), c.status)
		for _, pool := range []*pgxpool.Pool{s.pool, us} {
			for _, i := range []int64{id, usIDs[1]} {
				if st := statusOf(t, pool, i); st != lease.StatusReady {
					t.Fatalf("%s: item %d is %s after a refused action", c.name, i, st)
				}
			}
		}
	}

	// Cancel from the item page: the form posts its shard; only us's row changes.
	p = b.post("/ui/items/job_runs/act", url.Values{"action": {"cancel"}, "id": {itoa(id)}, "shard": {"us"},
		"back": {"items/job_runs/" + itoa(id) + "?shard=us"}, "confirm": {"yes"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "../../items/job_runs/"+itoa(id)+"?shard=us" {
		t.Fatalf("cancel: %d %q %s", p.status, p.header.Get("Location"), p.body)
	}
	if st := statusOf(t, us, id); st != lease.StatusCancelled {
		t.Fatalf("us:%d is %s, want cancelled", id, st)
	}
	if st := statusOf(t, s.pool, id); st != lease.StatusReady {
		t.Fatalf("eu:%d is %s: the action reached the other shard", id, st)
	}
	must(t, b.get("/ui/items/job_runs/"+itoa(id)+"?shard=us"), 200, "Cancel: 1 applied.", `<span class="state s-cancelled">`)
	// Retry the selection of the list (SHARD:ID): us's cancelled item, eu's ready one skipped.
	must(t, b.post("/ui/items/job_runs/act", url.Values{"action": {"retry"}, "id": {"us:" + itoa(id), "eu:" + itoa(id)}}), http.StatusSeeOther)
	must(t, b.get("/ui/items/job_runs"), 200, "Retry: 1 applied, 1 skipped (eu:"+itoa(id)+" is ready: not in the state retry needs, or gone)")
	if st := statusOf(t, us, id); st != lease.StatusReady {
		t.Fatalf("us:%d is %s after retry, want ready", id, st)
	}

	// A matching action of one shard.
	must(t, b.post("/ui/items/job_runs/act", url.Values{"scope": {"matching"}, "action": {"cancel"}, "shard": {"us"}}), 200,
		"Cancel every item matching shard &#34;us&#34; of job_runs,")
	must(t, b.post("/ui/items/job_runs/act", url.Values{"scope": {"matching"}, "action": {"cancel"}, "shard": {"us"}, "confirm": {"yes"}}),
		http.StatusSeeOther)
	var cancelled, ready int
	if err := us.QueryRow(context.Background(), "select count(*) filter (where status = 4), count(*) filter (where status = 0) from workq.job_runs_all").
		Scan(&cancelled, &ready); err != nil || cancelled != 30 || ready != 0 {
		t.Fatalf("us: %d cancelled, %d ready (%v)", cancelled, ready, err)
	}
	if err := s.pool.QueryRow(context.Background(), "select count(*) from workq.job_runs_all where status = 0").Scan(&ready); err != nil || ready != 30 {
		t.Fatalf("eu: %d ready (%v), want 30", ready, err)
	}

	// Counts: per shard; the overview sums the shards and breaks them down.
	must(t, b.get("/ui/counts"), 200, `<th scope="col">Shard</th>`, "<td>eu</td><td>job_runs</td>", "<td>us</td><td>job_runs</td>")
	deadline := time.Now().Add(30 * time.Second)
	for {
		p = b.get("/ui/api/overview")
		if strings.Contains(p.body, `"table":"job_runs","queue":"q","ready":30,`) && strings.Contains(p.body, `"shard":"us","sampled_at":`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the overview never showed both shards: %s", p.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, b.get("/ui/"), 200, `<h2 id="shards-h">Shards</h2>`, `<tr data-shard="eu">`, `<tr data-shard="us">`)
}

// A shard that does not answer leaves the others' pages whole: the item
// list, the exact counts and the overview show its items and counts, with
// a notice that names the shard, within the shard timeout.
func TestDashboardWithAShardDown(t *testing.T) {
	us, px := testutil.ProxiedPool(t, testdb.URL(t))
	s := newShardedSite(t, us, func(o *siteSetup) { o.ShardTimeout = 300 * time.Millisecond })
	jobs(t, s.pool, "eu", 2)
	jobs(t, us, "us", 2)
	b := s.browser()
	b.login(s.read)
	must(t, b.get("/ui/items/job_runs"), 200, "k.eu", "k.us")

	px.Cut()
	notice := "Shard us is unreachable and left out of this page: it did not answer within 300ms."
	start := time.Now()
	p := b.get("/ui/items/job_runs")
	must(t, p, 200, notice, "k.eu")
	if strings.Contains(p.body, "k.us") {
		t.Error("the cut shard's items are listed")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the page took %s with a shard down", took)
	}
	must(t, b.get("/ui/counts"), 200, notice, "<td>eu</td><td>job_runs</td>")
	deadline := time.Now().Add(30 * time.Second)
	for {
		p = b.get("/ui/api/overview")
		if strings.Contains(p.body, `"shard":"us","unreachable":"did not answer"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the overview never showed us unreachable: %s", p.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, b.get("/ui/"), 200, "Shard us is unreachable and left out of the counts and charts")

	// Back: the shard's items return once it answers within the shard
	// timeout again. The pool's connections died with the cut, so the first
	// request after the restore may still time out while new ones are made
	// (a CI run under -race at load took longer than 300ms once).
	px.Restore()
	deadline = time.Now().Add(30 * time.Second)
	for {
		p = b.get("/ui/items/job_runs")
		if p.status == 200 && strings.Contains(p.body, "k.us") && !strings.Contains(p.body, notice) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shard's items never came back after the restore: %d\n%s", p.status, p.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, p, 200, "k.eu", "k.us")
}

// The dashboard of one database shows no shard anywhere.
func TestDashboardUnshardedShowsNoShard(t *testing.T) {
	s := newSite(t)
	ids := jobs(t, s.pool, "one", 1)
	b := s.browser()
	b.login(s.admin)
	for _, path := range []string{"/ui/items/job_runs", "/ui/items/job_runs/" + itoa(ids[0]), "/ui/counts", "/ui/"} {
		p := b.get(path)
		must(t, p, 200)
		for _, no := range []string{"Shard", "shard="} {
			if strings.Contains(p.body, no) {
				t.Errorf("%s shows %q", path, no)
			}
		}
	}
	// The one database's name, as the API's, is "default".
	must(t, b.get("/ui/items/job_runs/"+itoa(ids[0])+"?shard=default"), 200)
	must(t, b.get("/ui/items/job_runs/"+itoa(ids[0])+"?shard=eu"), 404, "serves one database")
}

// With the first shard down the overview still shows the others' counts
// and pauses, saying which shard's pauses and limits it cannot show; a
// pause is done on the others and the message names the shard that
// failed.
func TestDashboardWithTheFirstShardDown(t *testing.T) {
	eu, px := testutil.ProxiedPool(t, testdb.URL(t))
	s := newSite(t, func(o *siteSetup) {
		o.pool = testdb.Pool(t)
		o.shards = []workq.Shard{{Name: "eu", Pool: eu}, {Name: "us", Pool: o.pool}}
		o.ShardTimeout = 300 * time.Millisecond
	})
	jobs(t, s.pool, "us", 2)
	b := s.browser()
	b.login(s.admin)
	b.awaitQueue("job_runs/q")
	px.Cut()
	must(t, b.get("/ui/"), 200, "The pauses and limits of shard eu are not shown: it did not answer within 300ms.")
	must(t, b.get("/ui/items/job_runs"), 200, "k.us", "Shard eu is unreachable and left out of this page")
	must(t, b.post("/ui/queues/job_runs/q/pause", url.Values{}), http.StatusSeeOther)
	must(t, b.get("/ui/"), 200, "Pause of job_runs/q failed on shard eu (did not answer within 300ms); done on us: do it again when the shard is back.",
		`<strong class="paused">paused</strong> on us`)
}
