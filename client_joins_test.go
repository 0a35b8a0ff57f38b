package workq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// TestClientJoins: a join is started, read and fed members through the
// Client, in the caller's transaction or on the pool; its errors are
// package outbox's sentinels, and a sharded front refuses it (a join lives
// on one shard) while a shard's Client takes it.
func TestClientJoins(t *testing.T) {
	ctx := context.Background()
	a, b := testdb.Pool(t), testdb.Pool(t)
	client, err := workq.NewClient(a, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	spec := outbox.JoinSpec{Expected: 2, OnComplete: outbox.JoinMessage{Topic: "order.packed"}}

	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	j, err := client.StartJoinTx(ctx, tx, spec)
	if err != nil || j.ID == 0 || j.Status != outbox.JoinOpen || j.Expected != 2 {
		t.Fatalf("StartJoinTx: %+v %v", j, err)
	}
	if _, err := client.SendManyTx(ctx, tx, []outbox.Message{{Topic: "pick", JoinID: j.ID}, {Topic: "pick", JoinID: j.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetJoin(ctx, j.ID); !errors.Is(err, outbox.ErrJoinNotFound) {
		t.Fatalf("GetJoin before the commit: %v, want ErrJoinNotFound", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := client.GetJoin(ctx, j.ID)
	if err != nil || got.Attached != 2 || got.Status != outbox.JoinOpen || got.OnCompleteTopic != "order.packed" {
		t.Fatalf("GetJoin: %+v %v", got, err)
	}

	pooled, err := client.StartJoin(ctx, outbox.JoinSpec{Expected: 1, OnComplete: outbox.JoinMessage{Topic: "done"}})
	if err != nil {
		t.Fatal(err)
	}
	sharded, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: a}, {Name: "b", Pool: b}}, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	onA, err := sharded.Shard("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		do      func() error
		is      []error
		message string
	}{
		{"invalid spec", func() error { _, err := client.StartJoin(ctx, outbox.JoinSpec{Expected: 0}); return err },
			[]error{workq.ErrInvalid}, "at least 1 member"},
		{"unknown join", func() error { _, err := client.GetJoin(ctx, 1<<40); return err },
			[]error{outbox.ErrJoinNotFound, workq.ErrNotFound}, ""},
		{"member of a full join", func() error {
			_, err := client.Send(ctx, outbox.Message{Topic: "pick", JoinID: j.ID})
			return err
		}, []error{outbox.ErrJoinFull}, ""},
		{"member of a join on the pool", func() error {
			_, err := client.Send(ctx, outbox.Message{Topic: "pick", JoinID: pooled.ID})
			return err
		}, nil, ""},
		{"StartJoin on a sharded front", func() error { _, err := sharded.StartJoin(ctx, spec); return err },
			[]error{workq.ErrInvalid}, "client.Shard(name).StartJoin"},
		{"StartJoinTx on a sharded front", func() error {
			tx, err := a.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			_, err = sharded.StartJoinTx(ctx, tx, spec)
			return err
		}, []error{workq.ErrInvalid}, "client.Shard(name).StartJoinTx"},
		{"GetJoin on a sharded front", func() error { _, err := sharded.GetJoin(ctx, j.ID); return err },
			[]error{workq.ErrInvalid}, "client.Shard(name).GetJoin"},
		{"GetJoin on the join's shard", func() error { _, err := onA.GetJoin(ctx, j.ID); return err }, nil, ""},
		{"StartJoin on a shard", func() error { _, err := onA.StartJoin(ctx, spec); return err }, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if len(tc.is) == 0 {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			for _, want := range tc.is {
				if !errors.Is(err, want) {
					t.Errorf("got %v, want it to match %v", err, want)
				}
			}
			if tc.message != "" && (err == nil || !strings.Contains(err.Error(), tc.message)) {
				t.Errorf("got %v, want it to say %q", err, tc.message)
			}
		})
	}
}
