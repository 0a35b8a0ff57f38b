package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

// Members are written here with plain SQL: the outbox write API (Send with
// Message.JoinID) writes the same column; the triggers do the rest.
func addJoinMembers(t *testing.T, ctx context.Context, db workqtype.DB, joinID int64, queue string, n, maxAttempts int) []int64 {
	t.Helper()
	ids, err := insertJoinMembers(ctx, db, joinID, queue, n, maxAttempts)
	if err != nil {
		t.Fatalf("add %d members to join %d: %v", n, joinID, err)
	}
	return ids
}

func insertJoinMembers(ctx context.Context, db workqtype.DB, joinID int64, queue string, n, maxAttempts int) ([]int64, error) {
	rows, err := db.Query(ctx, `
insert into workq.outbox (queue, topic, payload, join_id, max_attempts)
select $1, 'member', jsonb_build_object('n', i), $2, $4 from generate_series(1, $3::integer) i
returning id`, queue, joinID, n, maxAttempts)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return ids, outboxrt.JoinError(err)
}

// joinOutcome is an outcome message a join wrote.
type joinOutcome struct {
	Topic, Outcome string
	MessageID      uuid.UUID
}

// joinOutcomes lists the outcome messages of join id (found by the header the
// join adds).
func joinOutcomes(t *testing.T, ctx context.Context, db workqtype.DB, id int64) []joinOutcome {
	t.Helper()
	rows, err := db.Query(ctx, `
select topic, headers ->> 'workq-join-outcome', message_id from workq.outbox
where headers ->> 'workq-join-id' = $1::bigint::text order by id`, id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[joinOutcome])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func getJoin(t *testing.T, ctx context.Context, db workqtype.DB, id int64) outbox.Join {
	t.Helper()
	j, err := outboxrt.GetJoin(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func joinSpec(n int, policy outbox.MemberFailure) outbox.JoinSpec {
	return outbox.JoinSpec{
		Expected:        n,
		OnComplete:      outbox.JoinMessage{Topic: "joined", Queue: "outcomes", Payload: map[string]any{"ok": true}, Headers: map[string]string{"x": "1"}},
		OnFail:          &outbox.JoinMessage{Topic: "join-failed", Queue: "outcomes", PartitionKey: "k"},
		OnMemberFailure: policy,
	}
}

func startJoin(t *testing.T, ctx context.Context, db workqtype.DB, s outbox.JoinSpec) outbox.Join {
	t.Helper()
	j, err := outboxrt.StartJoin(ctx, db, s)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// endMember claims member id alone (its queue holds only it) and ends it with
// outcome through the lease engine, as the relay does.
func endMember(t *testing.T, ctx context.Context, pool *pgxpool.Pool, queue string, outcome lease.Outcome) {
	t.Helper()
	e := lease.New(pool, lease.Outbox)
	c, err := e.Claim(ctx, lease.ClaimParams{Queue: queue, Max: 1, Lease: time.Minute, WorkerID: "t"})
	if err != nil || len(c.Items) != 1 {
		t.Fatalf("claim %s: %d items, %v", queue, len(c.Items), err)
	}
	if _, err := e.Complete(ctx, []lease.Completion{{ID: c.Items[0].ID, Token: c.Token, Outcome: outcome, Error: "boom"}}); err != nil {
		t.Fatal(err)
	}
}

func checkOutcome(t *testing.T, ctx context.Context, db workqtype.DB, j outbox.Join, topic, outcome string) {
	t.Helper()
	got := joinOutcomes(t, ctx, db, j.ID)
	if topic == "" {
		if len(got) != 0 || j.OutcomeMessageID != uuid.Nil {
			t.Fatalf("join %d wrote %+v (outcome id %s); want nothing", j.ID, got, j.OutcomeMessageID)
		}
		return
	}
	if len(got) != 1 || got[0].Topic != topic || got[0].Outcome != outcome || got[0].MessageID != j.OutcomeMessageID {
		t.Fatalf("join %d wrote %+v (outcome id %s); want exactly one %q message, outcome %q", j.ID, got, j.OutcomeMessageID, topic, outcome)
	}
}

// Many members of one join ended at once by several workers, each on its
// own connection through the real lease engine (claim, then complete singly
// or in batches): the on-complete message is written exactly once, by the
// statement that ended the last member. Repeated to give the race many
// chances.
func TestJoinCompletesExactlyOnceUnderConcurrentCompletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 10)
	const rounds, members, workers = 25, 24, 6
	for r := range rounds {
		queue := fmt.Sprintf("r%d", r)
		j := startJoin(t, ctx, pool, joinSpec(members, outbox.FailWhenDone))
		addJoinMembers(t, ctx, pool, j.ID, queue, members, 4)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				<-start
				e := lease.New(pool, lease.Outbox)
				for {
					c, err := e.Claim(ctx, lease.ClaimParams{Queue: queue, Max: 1 + w%3, Lease: time.Minute, WorkerID: fmt.Sprint("w", w)})
					if err != nil {
						errs <- err
						return
					}
					if len(c.Items) == 0 {
						return
					}
					var cs []lease.Completion
					for _, it := range c.Items {
						cs = append(cs, lease.Completion{ID: it.ID, Token: c.Token, Outcome: lease.Done})
					}
					if a, err := e.Complete(ctx, cs); err != nil || len(a.Lost) > 0 {
						errs <- fmt.Errorf("complete: lost %v, %v", a.Lost, err)
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got := getJoin(t, ctx, pool, j.ID)
		if got.Status != outbox.JoinCompleted || got.Completed != members || got.Failed != 0 || got.Attached != members || got.FinishedAt.IsZero() {
			t.Fatalf("round %d: join %+v; want completed with %d done members", r, got, members)
		}
		checkOutcome(t, ctx, pool, got, "joined", "completed")
	}
	// The outcome messages are ordinary outbox messages in their own queue,
	// with the spec's payload and headers plus the join's.
	var n int
	var payload, headers []byte
	if err := pool.QueryRow(ctx, `select count(*) over (), payload, headers from workq.outbox where queue = 'outcomes' limit 1`).Scan(&n, &payload, &headers); err != nil {
		t.Fatal(err)
	}
	var h map[string]string
	if err := json.Unmarshal(headers, &h); err != nil || n != rounds || string(payload) != `{"ok": true}` || h["x"] != "1" || h["workq-join-outcome"] != "completed" {
		t.Errorf("outcome messages: %d, payload %s, headers %s; want %d with the spec's payload and headers", n, payload, headers, rounds)
	}
}

// A failed member under each policy: ignored (the join completes), failing
// the join once all members ended, or failing it at once. Members that end
// after the join ended are counted and write nothing.
func TestJoinMemberFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 4)
	type want struct {
		status          outbox.JoinStatus
		topic, outcome  string
		completed, fail int
	}
	for _, c := range []struct {
		name      string
		policy    outbox.MemberFailure
		noOnFail  bool
		afterFail want // after member 1 done, member 2 failed
		afterAll  want // after member 3 done too
	}{
		{"ignore", outbox.IgnoreFailures, false,
			want{outbox.JoinOpen, "", "", 1, 1}, want{outbox.JoinCompleted, "joined", "completed", 2, 1}},
		{"fail when done", outbox.FailWhenDone, false,
			want{outbox.JoinOpen, "", "", 1, 1}, want{outbox.JoinFailed, "join-failed", "member_failed", 2, 1}},
		{"fail fast", outbox.FailFast, false,
			want{outbox.JoinFailed, "join-failed", "member_failed", 1, 1}, want{outbox.JoinFailed, "join-failed", "member_failed", 2, 1}},
		{"fail fast without on-fail message", outbox.FailFast, true,
			want{outbox.JoinFailed, "", "", 1, 1}, want{outbox.JoinFailed, "", "", 2, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := joinSpec(3, c.policy)
			if c.noOnFail {
				s.OnFail = nil
			}
			j := startJoin(t, ctx, pool, s)
			queue := "m" + fmt.Sprint(j.ID)
			addJoinMembers(t, ctx, pool, j.ID, queue, 3, 4)
			check := func(stage string, w want) {
				t.Helper()
				got := getJoin(t, ctx, pool, j.ID)
				if got.Status != w.status || got.Completed != w.completed || got.Failed != w.fail {
					t.Fatalf("%s: join %+v; want status %s, %d done, %d failed", stage, got, w.status, w.completed, w.fail)
				}
				if w.status == outbox.JoinFailed && got.FailReason != outbox.JoinReasonMemberFailed {
					t.Fatalf("%s: fail reason %q", stage, got.FailReason)
				}
				checkOutcome(t, ctx, pool, got, w.topic, w.outcome)
			}
			endMember(t, ctx, pool, queue, lease.Done)
			endMember(t, ctx, pool, queue, lease.Failed)
			check("after a failure", c.afterFail)
			endMember(t, ctx, pool, queue, lease.Done)
			check("after all", c.afterAll)
		})
	}
}

// A member whose lease expired on its last attempt is failed by the reaper's
// statement (LeaseReapExpired), and that counts like any other end.
func TestJoinCountsReaperFailedMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 4)
	j := startJoin(t, ctx, pool, joinSpec(2, outbox.FailWhenDone))
	addJoinMembers(t, ctx, pool, j.ID, "a", 1, 4)
	addJoinMembers(t, ctx, pool, j.ID, "b", 1, 1) // one attempt only
	endMember(t, ctx, pool, "a", lease.Done)
	e := lease.New(pool, lease.Outbox)
	c, err := e.Claim(ctx, lease.ClaimParams{Queue: "b", Max: 1, Lease: time.Minute, WorkerID: "crashed"})
	if err != nil || len(c.Items) != 1 {
		t.Fatalf("claim: %v", err)
	}
	// The worker "crashed": its lease runs out (moved into the past rather
	// than waited for; locked_until is no column the join triggers look at).
	if _, err := pool.Exec(ctx, `update workq.outbox set locked_until = now() - interval '1 second' where id = $1`, c.Items[0].ID); err != nil {
		t.Fatal(err)
	}
	reaped, err := e.ReapExpired(ctx, "", 10)
	if err != nil || reaped.Failed != 1 {
		t.Fatalf("reap: %+v, %v; want one failed", reaped, err)
	}
	got := getJoin(t, ctx, pool, j.ID)
	if got.Status != outbox.JoinFailed || got.FailReason != outbox.JoinReasonMemberFailed || got.Completed != 1 || got.Failed != 1 {
		t.Fatalf("join %+v; want failed by its reaped member", got)
	}
	checkOutcome(t, ctx, pool, got, "join-failed", "member_failed")
}

// A revived member (lease.Engine.Revive) is no longer counted as failed, and
// counts again when it ends.
func TestJoinRevivedMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 4)
	j := startJoin(t, ctx, pool, joinSpec(2, outbox.FailWhenDone))
	ids := addJoinMembers(t, ctx, pool, j.ID, "a", 1, 4)
	addJoinMembers(t, ctx, pool, j.ID, "b", 1, 4)
	endMember(t, ctx, pool, "a", lease.Failed)
	if got := getJoin(t, ctx, pool, j.ID); got.Failed != 1 || got.Status != outbox.JoinOpen {
		t.Fatalf("after the failure: %+v", got)
	}
	if revived, err := lease.New(pool, lease.Outbox).Revive(ctx, "op", "retry", ids[0]); err != nil || len(revived) != 1 {
		t.Fatalf("revive: %v, %v", revived, err)
	}
	if got := getJoin(t, ctx, pool, j.ID); got.Failed != 0 || got.Completed != 0 || got.Status != outbox.JoinOpen {
		t.Fatalf("after the revive: %+v; want no member counted", got)
	}
	endMember(t, ctx, pool, "a", lease.Done)
	endMember(t, ctx, pool, "b", lease.Done)
	got := getJoin(t, ctx, pool, j.ID)
	if got.Status != outbox.JoinCompleted || got.Completed != 2 || got.Failed != 0 {
		t.Fatalf("join %+v; want completed", got)
	}
	checkOutcome(t, ctx, pool, got, "joined", "completed")
}

// A join past its deadline fails once and writes its on-fail message once;
// joins with a later deadline, none, or already ended are left alone; members
// that end after it failed are counted and write nothing.
func TestJoinDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 4)
	past := time.Now().Add(-time.Hour)

	expired := joinSpec(1, outbox.IgnoreFailures)
	expired.Deadline = past
	late := startJoin(t, ctx, pool, expired)
	addJoinMembers(t, ctx, pool, late.ID, "late", 1, 4)

	noFailMsg := expired
	noFailMsg.OnFail = nil
	silent := startJoin(t, ctx, pool, noFailMsg)

	later := joinSpec(1, outbox.IgnoreFailures)
	later.Timeout = time.Hour
	future := startJoin(t, ctx, pool, later)
	none := startJoin(t, ctx, pool, joinSpec(1, outbox.IgnoreFailures))

	ended := startJoin(t, ctx, pool, expired)
	addJoinMembers(t, ctx, pool, ended.ID, "ended", 1, 4)
	endMember(t, ctx, pool, "ended", lease.Done) // completes before the deadline is enforced

	if n, err := outboxrt.FailExpiredJoins(ctx, pool, 1); err != nil || n != 1 {
		t.Fatalf("first batch of one: %d, %v", n, err)
	}
	if n, err := outboxrt.FailExpiredJoins(ctx, pool, 100); err != nil || n != 1 {
		t.Fatalf("second batch: %d, %v; want the other expired join", n, err)
	}
	if n, err := outboxrt.FailExpiredJoins(ctx, pool, 100); err != nil || n != 0 {
		t.Fatalf("again: %d, %v; want nothing left", n, err)
	}
	for _, c := range []struct {
		j      outbox.Join
		status outbox.JoinStatus
		topic  string
	}{
		{late, outbox.JoinFailed, "join-failed"},
		{silent, outbox.JoinFailed, ""},
		{future, outbox.JoinOpen, ""},
		{none, outbox.JoinOpen, ""},
		{ended, outbox.JoinCompleted, "joined"},
	} {
		got := getJoin(t, ctx, pool, c.j.ID)
		if got.Status != c.status || (c.status == outbox.JoinFailed) != (got.FailReason == outbox.JoinReasonDeadline) {
			t.Errorf("join %d: %+v; want status %s", c.j.ID, got, c.status)
		}
		outcome := map[string]string{"join-failed": "deadline", "joined": "completed"}[c.topic]
		checkOutcome(t, ctx, pool, got, c.topic, outcome)
	}
	if future.Deadline.IsZero() || !future.Deadline.After(time.Now().Add(50*time.Minute)) {
		t.Errorf("timeout of an hour gave deadline %s", future.Deadline)
	}
	// The late member still ends, is counted, and writes nothing more.
	endMember(t, ctx, pool, "late", lease.Done)
	got := getJoin(t, ctx, pool, late.ID)
	if got.Completed != 1 || got.Status != outbox.JoinFailed {
		t.Fatalf("after the late member: %+v", got)
	}
	checkOutcome(t, ctx, pool, got, "join-failed", "deadline")
	// An ended join takes no new members.
	if _, err := insertJoinMembers(ctx, pool, late.ID, "late", 1, 4); !errors.Is(err, outbox.ErrJoinEnded) {
		t.Fatalf("member of an ended join: %v; want ErrJoinEnded", err)
	}
}

// The deadline loop fails an expired join on its own and stops within its
// bound.
func TestJoinDeadlineLoop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 4)
	s := joinSpec(2, outbox.IgnoreFailures)
	s.Deadline = time.Now().Add(-time.Minute)
	j := startJoin(t, ctx, pool, s)
	loop, err := outboxrt.NewJoinDeadlineLoop(pool, outboxrt.JoinDeadlineOptions{Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := loop.Start(ctx); err == nil {
		t.Error("second Start: no error")
	}
	for getJoin(t, ctx, pool, j.ID).Status == outbox.JoinOpen {
		if ctx.Err() != nil {
			t.Fatal("the loop never failed the expired join")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	stopCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := loop.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if err := loop.Stop(stopCtx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	checkOutcome(t, ctx, pool, getJoin(t, ctx, pool, j.ID), "join-failed", "deadline")
	if loop.Errors() != 0 {
		t.Errorf("loop errors: %d", loop.Errors())
	}
	if _, err := outboxrt.NewJoinDeadlineLoop(pool, outboxrt.JoinDeadlineOptions{Batch: -1}); !errors.Is(err, workqtype.ErrInvalid) {
		t.Errorf("batch -1: %v", err)
	}
}

// The last member's completion and the deadline statement race for a join
// past its deadline: exactly one of them ends it, and exactly one outcome
// message is written, the one that matches the join's final status.
func TestJoinDeadlineRacesLastMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 6)
	const rounds = 40
	wins := map[outbox.JoinStatus]int{}
	for r := range rounds {
		s := joinSpec(2, outbox.IgnoreFailures)
		s.Deadline = time.Now().Add(-time.Second)
		j := startJoin(t, ctx, pool, s)
		queue := fmt.Sprint("race", r)
		addJoinMembers(t, ctx, pool, j.ID, queue, 2, 4)
		endMember(t, ctx, pool, queue, lease.Done)
		e := lease.New(pool, lease.Outbox)
		c, err := e.Claim(ctx, lease.ClaimParams{Queue: queue, Max: 1, Lease: time.Minute, WorkerID: "w"})
		if err != nil || len(c.Items) != 1 {
			t.Fatalf("claim: %v", err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var completeErr, expireErr error
		wg.Go(func() {
			<-start
			_, completeErr = e.Complete(ctx, []lease.Completion{{ID: c.Items[0].ID, Token: c.Token, Outcome: lease.Done}})
		})
		wg.Go(func() {
			<-start
			_, expireErr = outboxrt.FailExpiredJoins(ctx, pool, 10)
		})
		close(start)
		wg.Wait()
		if completeErr != nil || expireErr != nil {
			t.Fatalf("round %d: complete %v, expire %v", r, completeErr, expireErr)
		}
		// A deadline run skipped a join locked by the completion: run it again.
		if _, err := outboxrt.FailExpiredJoins(ctx, pool, 10); err != nil {
			t.Fatal(err)
		}
		got := getJoin(t, ctx, pool, j.ID)
		if got.Completed != 2 {
			t.Fatalf("round %d: %+v; want both members counted", r, got)
		}
		switch got.Status {
		case outbox.JoinCompleted:
			checkOutcome(t, ctx, pool, got, "joined", "completed")
		case outbox.JoinFailed:
			checkOutcome(t, ctx, pool, got, "join-failed", "deadline")
		default:
			t.Fatalf("round %d: join still %s", r, got.Status)
		}
		wins[got.Status]++
	}
	t.Logf("completed first %d times, deadline first %d times", wins[outbox.JoinCompleted], wins[outbox.JoinFailed])
}

// A join started in a transaction that rolls back leaves nothing: no join, no
// members, no counts.
func TestJoinRolledBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 4)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j := startJoin(t, ctx, tx, joinSpec(2, outbox.FailFast))
	addJoinMembers(t, ctx, tx, j.ID, "q", 2, 4)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var joins, messages int
	if err := pool.QueryRow(ctx, `select (select count(*) from workq.outbox_joins), (select count(*) from workq.outbox)`).Scan(&joins, &messages); err != nil {
		t.Fatal(err)
	}
	if joins != 0 || messages != 0 {
		t.Fatalf("after rollback: %d joins, %d messages", joins, messages)
	}
	if _, err := outboxrt.GetJoin(ctx, pool, j.ID); !errors.Is(err, outbox.ErrJoinNotFound) {
		t.Fatalf("get rolled-back join: %v", err)
	}
	// Members written in a transaction that rolls back do not count either.
	committed := startJoin(t, ctx, pool, joinSpec(2, outbox.FailFast))
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addJoinMembers(t, ctx, tx, committed.ID, "q", 2, 4)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getJoin(t, ctx, pool, committed.ID); got.Attached != 0 {
		t.Fatalf("attached after rollback: %d", got.Attached)
	}
}

// Bad specs return an error wrapping workqtype.ErrInvalid and write nothing.
func TestJoinValidation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 2)
	ok := joinSpec(1, outbox.IgnoreFailures)
	for _, c := range []struct {
		name   string
		change func(*outbox.JoinSpec)
		want   string
	}{
		{"no members", func(s *outbox.JoinSpec) { s.Expected = 0 }, "at least 1 member"},
		{"negative members", func(s *outbox.JoinSpec) { s.Expected = -3 }, "at least 1 member"},
		{"no topic", func(s *outbox.JoinSpec) { s.OnComplete.Topic = "" }, "topic is required"},
		{"long topic", func(s *outbox.JoinSpec) { s.OnComplete.Topic = strings.Repeat("t", 257) }, "longer than 256"},
		{"bad utf-8 topic", func(s *outbox.JoinSpec) { s.OnComplete.Topic = "\xff" }, "UTF-8"},
		{"array payload", func(s *outbox.JoinSpec) { s.OnComplete.Payload = json.RawMessage(`[1]`) }, "JSON object"},
		{"string payload", func(s *outbox.JoinSpec) { s.OnComplete.Payload = "text" }, "JSON object"},
		{"invalid JSON", func(s *outbox.JoinSpec) { s.OnComplete.Payload = []byte(`{"a":`) }, "not valid JSON"},
		{"bad queue", func(s *outbox.JoinSpec) { s.OnComplete.Queue = "a b" }, "not a valid name"},
		{"long partition key", func(s *outbox.JoinSpec) { s.OnComplete.PartitionKey = strings.Repeat("k", 257) }, "partition key"},
		{"empty header name", func(s *outbox.JoinSpec) { s.OnComplete.Headers = map[string]string{"": "v"} }, "header"},
		{"on-fail without topic", func(s *outbox.JoinSpec) { s.OnFail = &outbox.JoinMessage{} }, "on-fail message: topic is required"},
		{"on-fail array payload", func(s *outbox.JoinSpec) { s.OnFail = &outbox.JoinMessage{Topic: "f", Payload: []int{1}} }, "JSON object"},
		{"deadline and timeout", func(s *outbox.JoinSpec) { s.Deadline, s.Timeout = time.Now(), time.Second }, "not both"},
		{"negative timeout", func(s *outbox.JoinSpec) { s.Timeout = -time.Second }, "negative"},
		{"unknown policy", func(s *outbox.JoinSpec) { s.OnMemberFailure = 7 }, "policy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := ok
			c.change(&s)
			if err := outboxrt.ValidateJoin(s); !errors.Is(err, workqtype.ErrInvalid) {
				t.Errorf("ValidateJoin: %v", err)
			}
			_, err := outboxrt.StartJoin(ctx, pool, s)
			if !errors.Is(err, workqtype.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("StartJoin: %v; want ErrInvalid saying %q", err, c.want)
			}
		})
	}
	if err := outboxrt.ValidateJoin(ok); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	if _, err := outboxrt.FailExpiredJoins(ctx, pool, 0); !errors.Is(err, workqtype.ErrInvalid) {
		t.Errorf("FailExpiredJoins max 0: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `select (select count(*) from workq.outbox_joins) + (select count(*) from workq.outbox)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows written: %d, %v", n, err)
	}
}

// Members attach when they are written, to an open join with room, and never
// finished; a message's join never changes. Each refusal changes nothing.
func TestJoinAttachRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 2)
	j := startJoin(t, ctx, pool, joinSpec(2, outbox.IgnoreFailures))
	ids := addJoinMembers(t, ctx, pool, j.ID, "q", 1, 4)
	other := startJoin(t, ctx, pool, joinSpec(2, outbox.IgnoreFailures))
	exec := func(sql string, args ...any) error {
		_, err := pool.Exec(ctx, sql, args...)
		return outboxrt.JoinError(err)
	}
	for _, c := range []struct {
		name string
		run  func() error
		want error
	}{
		{"unknown join", func() error { _, err := insertJoinMembers(ctx, pool, 999999, "q", 1, 4); return err }, outbox.ErrJoinNotFound},
		{"too many members", func() error { _, err := insertJoinMembers(ctx, pool, j.ID, "q", 2, 4); return err }, outbox.ErrJoinFull},
		{"finished member", func() error {
			return exec(`insert into workq.outbox (topic, join_id, status, finished_at) values ('m', $1, 2, now())`, j.ID)
		}, outbox.ErrJoinMemberFinished},
		{"moved to another join", func() error { return exec(`update workq.outbox set join_id = $1 where id = $2`, other.ID, ids[0]) }, outbox.ErrJoinFixed},
		{"detached", func() error { return exec(`update workq.outbox set join_id = null where id = $1`, ids[0]) }, outbox.ErrJoinFixed},
		{"attached later", func() error {
			var id int64
			if err := pool.QueryRow(ctx, `insert into workq.outbox (topic) values ('plain') returning id`).Scan(&id); err != nil {
				return err
			}
			defer func() { _, _ = pool.Exec(ctx, `delete from workq.outbox where id = $1`, id) }()
			return exec(`update workq.outbox set join_id = $1 where id = $2`, j.ID, id)
		}, outbox.ErrJoinFixed},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(); !errors.Is(err, c.want) {
				t.Fatalf("%v; want %v", err, c.want)
			}
		})
	}
	var members int
	if err := pool.QueryRow(ctx, `select count(*) from workq.outbox where join_id = $1`, j.ID).Scan(&members); err != nil || members != 1 {
		t.Fatalf("members: %d, %v", members, err)
	}
	if got := getJoin(t, ctx, pool, j.ID); got.Attached != 1 {
		t.Fatalf("attached: %+v", got)
	}
	if got := getJoin(t, ctx, pool, other.ID); got.Attached != 0 {
		t.Fatalf("other join attached: %+v", got)
	}
	// A member deleted before it ended (cancelled) counts as failed.
	ids2 := addJoinMembers(t, ctx, pool, j.ID, "q", 1, 4)
	if _, err := pool.Exec(ctx, `delete from workq.outbox where id = any($1)`, append(ids, ids2...)); err != nil {
		t.Fatal(err)
	}
	got := getJoin(t, ctx, pool, j.ID)
	if got.Failed != 2 || got.Status != outbox.JoinCompleted {
		t.Fatalf("after deleting both members: %+v; want 2 failed, completed (failures ignored)", got)
	}
	checkOutcome(t, ctx, pool, got, "joined", "completed")
}

// The join statements are planned on indexes over a large outbox_joins
// table: the counting update of the member trigger (its text read from the
// installed function) by primary key, FailExpiredJoins on the deadline index.
func TestJoinPlans(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := mustConnect(t, testdb.URL(t))
	if _, err := conn.Exec(ctx, `
insert into workq.outbox_joins (expected_steps, on_complete_topic, deadline, status, finished_at, fail_reason)
select 3, 't', case when i % 4 = 0 then now() + (i % 100 - 50) * interval '1 minute' end,
       case when i % 10 = 0 then 0 when i % 10 = 1 then 3 else 2 end,
       case when i % 10 <> 0 then now() end,
       case when i % 10 = 1 then 'deadline' end
from generate_series(1, 50000) i;
analyze workq.outbox_joins`); err != nil {
		t.Fatal(err)
	}
	var src string
	if err := conn.QueryRow(ctx, `select prosrc from pg_proc where proname = 'workq_outbox_join_count'`).Scan(&src); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)update workq.outbox_joins set.*?where id = new\.join_id`).FindString(src)
	if m == "" {
		t.Fatalf("no counting update in workq_outbox_join_count:\n%s", src)
	}
	update := strings.NewReplacer("new.join_id", "$1", "v_status", "2", "v_sign", "1").Replace(m)
	for _, generic := range []bool{false, true} {
		var plan planNode
		if generic {
			plan = explainGeneric(t, ctx, conn, update, "777")
		} else {
			plan = explainCustom(t, ctx, conn, update, int64(777))
		}
		if plan.seqScans("outbox_joins") || !plan.usesIndex("outbox_joins_pkey") {
			t.Errorf("the trigger's counting update (generic %v) does not use the primary key:\n%s\n%s", generic, update, plan)
		}
	}
	// The lock step that the lease statements run before the trigger counts
	// (workq_lock_joins, migration 00015): the batch's rows by the outbox's
	// primary key, their joins by theirs, also when the statistics know of
	// no member (the partial index outbox_join looks empty).
	fillForPlans(t, ctx, conn, "outbox")
	if err := conn.QueryRow(ctx, `select prosrc from pg_proc where proname = 'workq_lock_joins'`).Scan(&src); err != nil {
		t.Fatal(err)
	}
	m = regexp.MustCompile(`(?s)select j\.id from workq.outbox_joins j.*?for no key update of j`).FindString(src)
	if m == "" {
		t.Fatalf("no locking select in workq_lock_joins:\n%s", src)
	}
	lockJoins := strings.ReplaceAll(m, "p_ids", "$1::bigint[]")
	for _, generic := range []bool{false, true} {
		var plan planNode
		if generic {
			plan = explainGeneric(t, ctx, conn, lockJoins, "'{7,70007,40000}'")
		} else {
			plan = explainCustom(t, ctx, conn, lockJoins, []int64{7, 70007, 40000})
		}
		if plan.seqScans("outbox") || plan.seqScans("outbox_joins") || !plan.usesIndex("outbox_pkey") ||
			!plan.usesIndex("outbox_joins_pkey") || plan.usesIndex("outbox_join") {
			t.Errorf("workq_lock_joins' select (generic %v) does not read both tables by primary key:\n%s\n%s", generic, lockJoins, plan)
		}
	}
	sql, params := namedQuery(t, "outbox_joins", "OutboxJoinFailExpired")
	for _, generic := range []bool{false, true} {
		var plan planNode
		if generic {
			plan = explainGeneric(t, ctx, conn, sql, literalsFor(t, params, map[string]string{"max_rows": "500"})...)
		} else {
			plan = explainCustom(t, ctx, conn, sql, argsFor(t, params, map[string]any{"max_rows": int32(500)})...)
		}
		if plan.seqScans("outbox_joins") || !plan.usesIndex("outbox_joins_deadline") {
			t.Errorf("OutboxJoinFailExpired (generic %v) does not use outbox_joins_deadline:\n%s", generic, plan)
		}
	}
	sql, params = namedQuery(t, "outbox_joins", "OutboxJoinGet")
	if plan := explainCustom(t, ctx, conn, sql, argsFor(t, params, map[string]any{"id": int64(5)})...); !plan.usesIndex("outbox_joins_pkey") {
		t.Errorf("OutboxJoinGet does not use the primary key:\n%s", plan)
	}
}

// Workers that end members of the same joins at the same time never
// deadlock, whatever order their batches are in: 4 workers complete 30 joins
// of 50 members in batches that each touch every join, half of them in
// ascending and half in descending join order (in the batch and in the
// members' ids, so whichever order the statement visits its rows in, two
// workers meet the joins in opposite orders). Each batch ends one member of
// every join, so without a fixed lock order two overlapping statements lock
// the join rows crosswise. PostgreSQL's own count of deadlocks in the test's
// database (pg_stat_database.deadlocks) must not move; the end of the test
// provokes one deadlock on purpose to show that the count does move.
func TestJoinConcurrentCompletionsNeverDeadlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	url := testdb.URL(t)
	admin := mustConnect(t, url)
	const joins, members, workers = 30, 50, 4

	// Joins: every fifth is FailFast and one of its members fails.
	joinIDs := make([]int64, joins)
	for k := range joinIDs {
		policy := outbox.FailWhenDone
		if k%5 == 0 {
			policy = outbox.FailFast
		}
		joinIDs[k] = startJoin(t, ctx, admin, joinSpec(members, policy)).ID
	}
	// Member m of join k goes to worker m%workers (its own queue), written
	// round by round over every join, in ascending join order for even
	// workers and descending for odd ones.
	joinOf := map[int64]int{}
	failing := map[int64]bool{}
	for w := range workers {
		rows, err := admin.Query(ctx, `
insert into workq.outbox (queue, topic, payload, join_id)
select $1, 'member', jsonb_build_object('m', m.m), j.id
from generate_series($2::integer, $3::integer - 1, $4::integer) with ordinality m(m, round),
     unnest($5::bigint[]) with ordinality j(id, k)
order by m.round, case when $6 then j.k else -j.k end
returning id, join_id, (payload ->> 'm')::integer`,
			fmt.Sprint("w", w), w, members, workers, joinIDs, w%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, join int64
			var m int
			if err := rows.Scan(&id, &join, &m); err != nil {
				t.Fatal(err)
			}
			k := slices.Index(joinIDs, join)
			joinOf[id] = k
			failing[id] = m == 0 && k%5 == 0
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if len(joinOf) != joins*members {
		t.Fatalf("wrote %d members; want %d", len(joinOf), joins*members)
	}

	before := databaseDeadlocks(t, ctx, admin)
	var observed atomic.Int64 // deadlock errors the workers saw (and retried)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := make(chan struct{})
	for w := range workers {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer pool.Close() // a backend's pending statistics are written when it exits
			<-start
			e := lease.New(pool, lease.Outbox)
			for {
				c, err := e.Claim(ctx, lease.ClaimParams{Queue: fmt.Sprint("w", w), Max: joins, Lease: time.Minute, WorkerID: fmt.Sprint("w", w)})
				if err != nil {
					errs <- err
					return
				}
				if len(c.Items) == 0 {
					return
				}
				cs := make([]lease.Completion, len(c.Items))
				for i, it := range c.Items {
					cs[i] = lease.Completion{ID: it.ID, Token: c.Token, Outcome: lease.Done}
					if failing[it.ID] {
						cs[i].Outcome, cs[i].Error = lease.Failed, "boom"
					}
				}
				slices.SortFunc(cs, func(a, b lease.Completion) int {
					if w%2 == 0 {
						return joinOf[a.ID] - joinOf[b.ID]
					}
					return joinOf[b.ID] - joinOf[a.ID]
				})
				for {
					a, err := e.Complete(ctx, cs)
					if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "40P01" {
						observed.Add(1) // the statement was rolled back: retry it, as the completer does
						continue
					}
					if err != nil || len(a.Lost) > 0 {
						errs <- fmt.Errorf("worker %d: complete: lost %v, %v", w, a.Lost, err)
						return
					}
					break
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k, id := range joinIDs {
		got := getJoin(t, ctx, admin, id)
		if k%5 == 0 {
			if got.Status != outbox.JoinFailed || got.Completed+got.Failed != members || got.Failed != 1 {
				t.Errorf("FailFast join %d: %+v; want failed with %d members ended, 1 failed", k, got, members)
			}
			checkOutcome(t, ctx, admin, got, "join-failed", "member_failed")
			continue
		}
		if got.Status != outbox.JoinCompleted || got.Completed != members || got.Failed != 0 {
			t.Errorf("join %d: %+v; want completed with %d done members", k, got, members)
		}
		checkOutcome(t, ctx, admin, got, "joined", "completed")
	}
	after := databaseDeadlocks(t, ctx, admin)
	if after != before || observed.Load() != 0 {
		t.Fatalf("%d deadlocks in the database (%d before, %d after), %d seen by the workers; want none",
			after-before, before, after, observed.Load())
	}

	// The control: two transactions that lock two joins crosswise deadlock,
	// and the count shows it.
	c1, c2 := mustConnect(t, url), mustConnect(t, url)
	lock := `update workq.outbox_joins set updated_at = now() where id = $1`
	for _, s := range []struct {
		c  *pgx.Conn
		id int64
	}{{c1, joinIDs[0]}, {c2, joinIDs[1]}} {
		if _, err := s.c.Exec(ctx, "begin"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.c.Exec(ctx, lock, s.id); err != nil {
			t.Fatal(err)
		}
	}
	second := make(chan error, 1)
	go func() {
		_, err := c1.Exec(ctx, lock, joinIDs[1])
		second <- err
	}()
	// c2's update waits for c1 (or c1's for c2): one of the two is aborted.
	_, err2 := c2.Exec(ctx, lock, joinIDs[0])
	err1 := <-second
	if (err1 == nil) == (err2 == nil) {
		t.Fatalf("crosswise locks: %v, %v; want exactly one deadlock error", err1, err2)
	}
	c1.Close(ctx)
	c2.Close(ctx)
	if got := databaseDeadlocks(t, ctx, admin); got != after+1 {
		t.Fatalf("the deliberate deadlock: count %d, want %d", got, after+1)
	}
}

// databaseDeadlocks returns pg_stat_database.deadlocks of conn's database
// once no other backend is connected to it: a backend reports its statistics
// when it exits, or when it has been idle for a while.
func databaseDeadlocks(t *testing.T, ctx context.Context, conn *pgx.Conn) int64 {
	t.Helper()
	for {
		var others int
		if err := conn.QueryRow(ctx, `select count(*) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`).Scan(&others); err != nil {
			t.Fatal(err)
		}
		if others == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d other backends still connected to the test database: %v", others, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	var n int64
	if err := conn.QueryRow(ctx, `select deadlocks from pg_stat_database where datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A cancelled member (ready: at once; running: when its attempt ends)
// counts as failed; a revive of it takes it out of the count again.
func TestJoinCancelledMemberCountsAsFailed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testdb.PoolWith(t, 4)
	j := startJoin(t, ctx, pool, joinSpec(3, outbox.FailWhenDone))
	a := addJoinMembers(t, ctx, pool, j.ID, "a", 1, 4)
	addJoinMembers(t, ctx, pool, j.ID, "b", 1, 4)
	addJoinMembers(t, ctx, pool, j.ID, "c", 1, 4)
	e := lease.New(pool, lease.Outbox)
	if c, err := e.Cancel(ctx, "op", "", a[0]); err != nil || len(c.Now) != 1 {
		t.Fatalf("cancel a ready member: %+v, %v", c, err)
	}
	if got := getJoin(t, ctx, pool, j.ID); got.Failed != 1 || got.Status != outbox.JoinOpen {
		t.Fatalf("after cancelling a ready member: %+v", got)
	}
	claim, err := e.Claim(ctx, lease.ClaimParams{Queue: "b", Max: 1, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(claim.Items) != 1 {
		t.Fatalf("claim: %v", err)
	}
	if c, err := e.Cancel(ctx, "op", "", claim.Items[0].ID); err != nil || len(c.Requested) != 1 {
		t.Fatalf("cancel a running member: %+v, %v", c, err)
	}
	if got := getJoin(t, ctx, pool, j.ID); got.Failed != 1 {
		t.Fatalf("a running member's cancel request counted before its attempt ended: %+v", got)
	}
	if _, err := e.Complete(ctx, []lease.Completion{{ID: claim.Items[0].ID, Token: claim.Token, Outcome: lease.Done}}); err != nil {
		t.Fatal(err)
	}
	endMember(t, ctx, pool, "c", lease.Done)
	got := getJoin(t, ctx, pool, j.ID)
	if got.Status != outbox.JoinFailed || got.Completed != 1 || got.Failed != 2 || got.FailReason != outbox.JoinReasonMemberFailed {
		t.Fatalf("join %+v; want failed with two cancelled members counted as failed", got)
	}
}
