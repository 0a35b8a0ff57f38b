package jobq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// EnqueueManyFast pushes volume with COPY: it returns how many jobs it
// added, not their ids. On a pool it commits the jobs and their NOTIFY in
// one transaction of its own; pass a pgx.Tx to enqueue inside yours.
func ExampleClient_EnqueueManyFast() {
	url, drop, err := testdb.NewDatabase() // in a service: the service's database
	if err != nil {
		panic(err)
	}
	defer func() { _ = drop() }()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	client := jobq.New(jobq.Options{})
	jobs := make([]jobq.Job, 0, 1000)
	for i := range 1000 {
		jobs = append(jobs, jobq.Job{Queue: "thumbnails", Kind: "thumbnail.render", Payload: map[string]int{"image": i}})
	}
	jobs[999].Delay = time.Minute // run_at = the database's now() + 1 minute
	n, err := client.EnqueueManyFast(ctx, pool, jobs)
	if err != nil {
		panic(err)
	}
	fmt.Println("enqueued", n)

	// Dedup keys need ON CONFLICT, which COPY lacks: use EnqueueMany for them.
	_, err = client.EnqueueManyFast(ctx, pool, []jobq.Job{{Kind: "report.build", DedupKey: "daily"}})
	fmt.Println(errors.Is(err, workqtype.ErrInvalid))
	// Output:
	// enqueued 1000
	// true
}
