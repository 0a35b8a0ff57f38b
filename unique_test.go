package workq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// UniqueArgs set their own unique options and metadata; options given to
// Enqueue win over them.
type UniqueArgs struct {
	N int `json:"n"`
}

func (UniqueArgs) Kind() string { return "unique.args" }

func (UniqueArgs) EnqueueOpts() workq.EnqueueOpts {
	return workq.EnqueueOpts{Unique: workq.UniqueOpts{ByArgs: true,
		ByStates: []workq.JobState{workq.JobStateReady, workq.JobStateInProgress, workq.JobStateDone}},
		Metadata: map[string]string{"from": "args"}}
}

// A typed handler sees the metadata its job was enqueued with, and admin
// (the API and the dashboard read it) shows it; a unique job whose states
// include done blocks its duplicate once done, across batches too.
func TestClientMetadataAndUnique(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	got := make(chan map[string]string, 4)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(_ context.Context, job *workq.Job[UniqueArgs]) error {
		got <- job.Metadata
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	first, err := client.Enqueue(ctx, UniqueArgs{N: 1}, &workq.EnqueueOpts{Metadata: map[string]string{"tenant": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Stop(ctx) }()
	select {
	case m := <-got:
		if m["tenant"] != "acme" || len(m) != 1 {
			t.Fatalf("handler saw metadata %v, want tenant=acme only", m)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not run")
	}
	it := waitItemStatus(t, pool, first.ID, "done")
	if it.Metadata["tenant"] != "acme" {
		t.Fatalf("admin item metadata %v", it.Metadata)
	}
	// Done, and done is among its states: the next one is a duplicate.
	dup, err := client.Enqueue(ctx, UniqueArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.EnqueueMany(ctx, []workq.EnqueueParams{{Args: UniqueArgs{N: 1}}, {Args: UniqueArgs{N: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || dup.ID != first.ID || !res[0].Duplicate || res[0].ID != first.ID || res[1].Duplicate {
		t.Fatalf("after done: %+v, batch %+v (first %d)", dup, res, first.ID)
	}
	select {
	case m := <-got:
		if m["from"] != "args" {
			t.Fatalf("the args' metadata: %v", m)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the batch's new job did not run")
	}
	if _, err := client.EnqueueManyFast(ctx, []workq.EnqueueParams{{Args: UniqueArgs{N: 3}}}); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("EnqueueManyFast of a unique job: %v", err)
	}
	err = client.ValidateArgs(UniqueArgs{}, &workq.EnqueueOpts{Unique: workq.UniqueOpts{ByStates: []workq.JobState{workq.JobStateDone}}})
	var ve *workq.ValidationError
	if !errors.As(err, &ve) || ve.Field != "unique.by_states" {
		t.Fatalf("states without ready and in_progress: %v", err)
	}
}

func waitItemStatus(t *testing.T, pool workq.DB, id int64, status string) admin.Item {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		it, err := admin.Get(context.Background(), pool, lease.JobRuns, id)
		if err != nil {
			t.Fatal(err)
		}
		if it.Status == status {
			return it
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s, want %s", id, it.Status, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
