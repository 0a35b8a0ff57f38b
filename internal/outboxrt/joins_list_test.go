package outboxrt_test

import (
	"context"
	"errors"
	"testing"

	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

func TestListJoins(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	var ids []int64
	for i := range 3 {
		j, err := outboxrt.StartJoin(ctx, pool, outbox.JoinSpec{Expected: i + 1, OnComplete: outbox.JoinMessage{Topic: "done"},
			OnFail: &outbox.JoinMessage{Topic: "stuck"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	// The middle join gets one member, which fails: with the default
	// policy the join stays open, counting it.
	if _, err := pool.Exec(ctx, `insert into workq.outbox (topic, payload, join_id) values ('m', '{}', $1)`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `update workq.outbox set status = 3, finished_at = now() where join_id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	// The first one fails by deadline, by hand.
	if _, err := pool.Exec(ctx, `select workq.workq_outbox_join_finish($1, 3::smallint, 'deadline')`, ids[0]); err != nil {
		t.Fatal(err)
	}

	all, err := outboxrt.ListJoins(ctx, pool, outboxrt.JoinQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].ID != ids[2] || all[2].ID != ids[0] {
		t.Fatalf("all joins: %+v, want %v newest first", all, ids)
	}
	mid := all[1]
	if mid.Attached != 1 || mid.Failed != 1 || mid.Expected != 2 || mid.Status != outbox.JoinOpen ||
		mid.OnCompleteTopic != "done" || mid.OnFailTopic != "stuck" {
		t.Errorf("join with a failed member: %+v", mid)
	}
	if all[2].Status != outbox.JoinFailed || all[2].FailReason != outbox.JoinReasonDeadline {
		t.Errorf("failed join: %+v", all[2])
	}
	open, err := outboxrt.ListJoins(ctx, pool, outboxrt.JoinQuery{OnlyOpen: true, Before: ids[2], Limit: 5})
	if err != nil || len(open) != 1 || open[0].ID != ids[1] {
		t.Errorf("open joins below %d: %+v %v, want [%d]", ids[2], open, err, ids[1])
	}
	if _, err := outboxrt.ListJoins(ctx, pool, outboxrt.JoinQuery{Limit: 1001}); !errors.Is(err, workqtype.ErrInvalid) {
		t.Errorf("limit 1001: %v, want ErrInvalid", err)
	}
}
