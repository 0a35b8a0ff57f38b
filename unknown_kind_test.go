package workq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// knownArgs has a worker in the Clients of these tests; unknownArgs has none.
type knownArgs struct{}

func (knownArgs) Kind() string { return "kinds.known" }

type unknownArgs struct{}

func (unknownArgs) Kind() string { return "kinds.unknown" }

// enqueueBatch enqueues params with one of the Client's job enqueue methods.
type enqueueBatch func(ctx context.Context, c *workq.Client, pool *pgxpool.Pool, params []workq.EnqueueParams) error

// inTx runs f in a transaction on pool that commits when f succeeds.
func inTx(ctx context.Context, pool *pgxpool.Pool, f func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, f)
}

var enqueueMethods = map[string]enqueueBatch{
	"Enqueue": func(ctx context.Context, c *workq.Client, _ *pgxpool.Pool, ps []workq.EnqueueParams) error {
		for _, p := range ps {
			if _, err := c.Enqueue(ctx, p.Args, p.Opts); err != nil {
				return err
			}
		}
		return nil
	},
	"EnqueueTx": func(ctx context.Context, c *workq.Client, pool *pgxpool.Pool, ps []workq.EnqueueParams) error {
		return inTx(ctx, pool, func(tx pgx.Tx) error {
			for _, p := range ps {
				if _, err := c.EnqueueTx(ctx, tx, p.Args, p.Opts); err != nil {
					return err
				}
			}
			return nil
		})
	},
	"EnqueueMany": func(ctx context.Context, c *workq.Client, _ *pgxpool.Pool, ps []workq.EnqueueParams) error {
		_, err := c.EnqueueMany(ctx, ps)
		return err
	},
	"EnqueueManyTx": func(ctx context.Context, c *workq.Client, pool *pgxpool.Pool, ps []workq.EnqueueParams) error {
		return inTx(ctx, pool, func(tx pgx.Tx) error {
			_, err := c.EnqueueManyTx(ctx, tx, ps)
			return err
		})
	},
	"EnqueueManyFast": func(ctx context.Context, c *workq.Client, _ *pgxpool.Pool, ps []workq.EnqueueParams) error {
		_, err := c.EnqueueManyFast(ctx, ps)
		return err
	},
	"EnqueueManyFastTx": func(ctx context.Context, c *workq.Client, pool *pgxpool.Pool, ps []workq.EnqueueParams) error {
		return inTx(ctx, pool, func(tx pgx.Tx) error {
			_, err := c.EnqueueManyFastTx(ctx, tx, ps)
			return err
		})
	},
}

// A Client with job workers refuses, in every enqueue method, a batch
// with a kind it has no worker for: ErrUnknownKind (and ErrInvalid),
// naming the kind, and nothing of the batch is written. A Client without
// job workers, or with SkipUnknownKindCheck, writes it.
func TestEnqueueUnknownKind(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	topicsOnly := workq.NewWorkers()
	if err := workq.HandleOutbox(topicsOnly, "", func(context.Context, *workq.Message[map[string]any]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	clients := []struct {
		name    string
		cfg     workq.Config
		refuses bool
	}{
		{"with job workers", workq.Config{Workers: knownWorkers()}, true},
		{"SkipUnknownKindCheck", workq.Config{Workers: knownWorkers(), SkipUnknownKindCheck: true}, false},
		{"producer", workq.Config{}, false},
		{"topic handlers only", workq.Config{Workers: topicsOnly}, false},
	}
	batch := []workq.EnqueueParams{{Args: knownArgs{}}, {Args: unknownArgs{}}, {Args: knownArgs{}}}
	for _, cc := range clients {
		cc.cfg.Maintenance.Disabled = true
		client, err := workq.NewClient(pool, cc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		for method, enqueue := range enqueueMethods {
			t.Run(cc.name+"/"+method, func(t *testing.T) {
				if _, err := pool.Exec(ctx, `truncate workq.job_runs`); err != nil {
					t.Fatal(err)
				}
				err := enqueue(ctx, client, pool, batch)
				var n int
				if err := pool.QueryRow(ctx, `select count(*) from workq.job_runs_all`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if !cc.refuses {
					if err != nil || n != len(batch) {
						t.Fatalf("%v, %d jobs written; want the whole batch", err, n)
					}
					return
				}
				if !errors.Is(err, workq.ErrUnknownKind) || !errors.Is(err, workq.ErrInvalid) || !strings.Contains(err.Error(), `"kinds.unknown"`) {
					t.Errorf("error %v: want ErrUnknownKind and ErrInvalid, naming the kind", err)
				}
				if method != "Enqueue" && n != 0 {
					t.Errorf("%d jobs written: a refused batch writes nothing", n)
				}
				if method == "EnqueueMany" && !strings.Contains(err.Error(), "job 1") {
					t.Errorf("error %v: want the job's index", err)
				}
			})
		}
		if err := client.ValidateArgs(unknownArgs{}, nil); cc.refuses != errors.Is(err, workq.ErrUnknownKind) {
			t.Errorf("%s: ValidateArgs of an unknown kind: %v", cc.name, err)
		}
	}
}

// The check is for job kinds only: a Client with job workers sends outbox
// messages, receives inbox messages and schedules timers of topics it has
// no handler for (relay publishers, other services, default handlers
// handle them); a sharded Client refuses unknown kinds as one database's.
func TestUnknownKindIsForJobsOnly(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Workers: knownWorkers(), Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Send(ctx, outbox.Message{Topic: "nobody.here", Payload: map[string]int{}}); err != nil {
		t.Errorf("Send to a topic without a handler: %v", err)
	}
	if _, err := client.ScheduleTimer(ctx, timers.Timer{Topic: "nobody.here", DueTime: time.Now(), Payload: map[string]int{}}); err != nil {
		t.Errorf("ScheduleTimer of a topic without a handler: %v", err)
	}

	sharded, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: testdb.Pool(t)}, {Name: "b", Pool: testdb.Pool(t)}},
		workq.Config{Workers: knownWorkers(), Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sharded.EnqueueMany(ctx, []workq.EnqueueParams{{Args: knownArgs{}}, {Args: unknownArgs{}}}); !errors.Is(err, workq.ErrUnknownKind) {
		t.Errorf("sharded EnqueueMany of an unknown kind: %v, want ErrUnknownKind", err)
	}
	if _, err := sharded.EnqueueManyFast(ctx, []workq.EnqueueParams{{Args: unknownArgs{}}}); !errors.Is(err, workq.ErrUnknownKind) {
		t.Errorf("sharded EnqueueManyFast of an unknown kind: %v, want ErrUnknownKind", err)
	}
	if _, err := sharded.Enqueue(ctx, knownArgs{}, nil); err != nil {
		t.Errorf("sharded Enqueue of a known kind: %v", err)
	}
}

// knownWorkers is a set with the worker of knownArgs (a set serves one
// Client).
func knownWorkers() *workq.Workers {
	ws := workq.NewWorkers()
	workq.AddWorker(ws, workq.WorkFunc(func(context.Context, *workq.Job[knownArgs]) error { return nil }))
	return ws
}
