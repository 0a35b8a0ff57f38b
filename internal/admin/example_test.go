package admin_test

import (
	"context"
	"fmt"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// An operator lists a queue's ready job runs, cancels one, and reads its
// history from the run archive.
func Example() {
	ctx := context.Background()
	url, drop, err := testdb.NewDatabase()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	client := jobq.New(jobq.Options{})
	for _, kind := range []string{"email.send", "email.send", "report.build"} {
		if _, err := client.Enqueue(ctx, pool, jobq.Job{Queue: "mail", Kind: kind}); err != nil {
			fmt.Println(err)
			return
		}
	}

	page, err := admin.List(ctx, pool, lease.JobRuns, admin.Filter{Queue: "mail", Kind: "email.send", Status: "ready"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ready email.send jobs:", len(page.Items))

	newest := page.Items[0].ID
	res, err := admin.Cancel(ctx, pool, lease.JobRuns, admin.Actor{Name: "ops:alice", Reason: "duplicate"}, newest)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("cancelled:", len(res.Applied), "skipped:", len(res.Skipped))

	item, _ := admin.Get(ctx, pool, lease.JobRuns, newest)
	attempts, _ := admin.Attempts(ctx, pool, lease.JobRuns, newest)
	fmt.Println(item.Status, "-", item.LastError, "-", attempts[0].Outcome, "by", attempts[0].Worker)
	// Output:
	// ready email.send jobs: 2
	// cancelled: 1 skipped: 0
	// cancelled - cancelled by ops:alice: duplicate - cancelled by ops:alice
}

// Every failed job run of a queue whose error mentions a text is retried
// by the server, newest first, 1000 at a time, up to a cap.
func ExampleRetryMatching() {
	ctx := context.Background()
	url, drop, err := testdb.NewDatabase()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	// 2500 failed job runs, four in five of them with an SMTP error.
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (queue, kind, payload, status, finished_at, last_error)
		select 'mail', 'email.send', '{}', 3, now(), case when i % 5 = 0 then 'bad address' else 'SMTP timeout' end
		from generate_series(1, 2500) i`); err != nil {
		fmt.Println(err)
		return
	}
	f := admin.Filter{Queue: "mail", Status: "failed", ErrorText: "smtp"}
	res, err := admin.RetryMatching(ctx, pool, lease.JobRuns, admin.Actor{Name: "ops:alice", Reason: "relay fixed"}, f, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("retried:", res.Applied, "batches:", res.Batches, "more:", res.Next != 0)
	// Output:
	// retried: 2000 batches: 2 more: false
}
