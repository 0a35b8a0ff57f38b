package outboxrt

// Fan-in joins: a join expects N member messages and, when all of them have
// ended, writes one outcome message into the outbox. The counting and the
// outcome live in the database (db/migrations/00004_outbox_joins.sql): the
// statements that end members count them through a trigger, so there is no
// polling and no window. docs/outbox_joins.md explains the design.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

// maxJoinPayload bounds a join message's payload as the job client does.
var maxJoinPayload = workqtype.DefaultMaxPayload

type joinMessage struct {
	queue, topic           string
	payload, headers       []byte
	partition, correlation *string
}

func prepareJoinMessage(which string, m outbox.JoinMessage) (joinMessage, error) {
	p := joinMessage{queue: m.Queue, topic: m.Topic}
	// invalid is a *workqtype.ValidationError about field of this message
	// ("on_complete.topic"), its text naming the message.
	invalid := func(field, msg string) error {
		return workqtype.Invalid(strings.ReplaceAll(which, "-", "_")+"."+field, "join "+which+" message: "+msg)
	}
	if p.queue == "" {
		p.queue = workqtype.DefaultQueue
	}
	if !workqtype.ValidName(p.queue) {
		return p, invalid("queue", fmt.Sprintf("queue %q is not a valid name (%s)", p.queue, workqtype.NameRule))
	}
	if msg := checkJoinText("topic", m.Topic, true); msg != "" {
		return p, invalid("topic", msg)
	}
	if msg := checkJoinText("partition key", m.PartitionKey, false); msg != "" {
		return p, invalid("partition_key", msg)
	}
	if m.PartitionKey != "" {
		p.partition = &m.PartitionKey
	}
	if m.CorrelationID != "" {
		if !workqtype.ValidText(m.CorrelationID) {
			return p, invalid("correlation_id", "correlation id is not valid UTF-8 text")
		}
		p.correlation = &m.CorrelationID
	}
	payload, err := workqtype.EncodePayload(m.Payload, maxJoinPayload)
	if err != nil {
		return p, fmt.Errorf("join %s message: %w", which, err)
	}
	p.payload = payload
	headers := map[string]string{}
	for k, v := range m.Headers {
		if k == "" || !workqtype.ValidText(k) || !workqtype.ValidText(v) {
			return p, invalid("headers", fmt.Sprintf("header %q must be a non-empty name and valid UTF-8 text", k))
		}
		headers[k] = v
	}
	if p.headers, err = json.Marshal(headers); err != nil {
		return p, invalid("headers", fmt.Sprintf("headers: %v", err))
	}
	return p, nil
}

// checkJoinText says what is wrong with the text s, or "".
func checkJoinText(what, s string, required bool) string {
	switch {
	case s == "" && required:
		return what + " is required"
	case s == "":
		return ""
	case !workqtype.ValidText(s):
		return what + " is not valid UTF-8 text"
	case utf8.RuneCountInString(s) > 256:
		return what + " is longer than 256 characters"
	}
	return ""
}

func prepareJoin(s outbox.JoinSpec) (gen.OutboxJoinStartParams, error) {
	var arg gen.OutboxJoinStartParams
	if s.Expected < 1 || s.Expected > math.MaxInt32 {
		return arg, workqtype.Invalid("expected", fmt.Sprintf("a join expects at least 1 member (and at most %d), got %d", math.MaxInt32, s.Expected))
	}
	switch s.OnMemberFailure {
	case outbox.IgnoreFailures, outbox.FailWhenDone, outbox.FailFast:
	default:
		return arg, workqtype.Invalid("on_member_failure", fmt.Sprintf("unknown member failure policy %d", s.OnMemberFailure))
	}
	if !s.Deadline.IsZero() && s.Timeout != 0 {
		return arg, workqtype.Invalid("deadline", "set a join's deadline or its timeout, not both")
	}
	if s.Timeout < 0 {
		return arg, workqtype.Invalid("timeout", fmt.Sprintf("join timeout %s is negative", s.Timeout))
	}
	done, err := prepareJoinMessage("on-complete", s.OnComplete)
	if err != nil {
		return arg, err
	}
	arg = gen.OutboxJoinStartParams{
		ExpectedSteps: int32(s.Expected), OnMemberFailure: int16(s.OnMemberFailure),
		OnCompleteQueue: done.queue, OnCompleteTopic: done.topic, OnCompletePayload: done.payload,
		OnCompleteHeaders: done.headers, OnCompletePartitionKey: done.partition, OnCompleteCorrelationID: done.correlation,
		OnFailQueue: "default", OnFailPayload: []byte("{}"), OnFailHeaders: []byte("{}"),
	}
	if s.OnFail != nil {
		fail, err := prepareJoinMessage("on-fail", *s.OnFail)
		if err != nil {
			return arg, err
		}
		arg.OnFailQueue, arg.OnFailTopic, arg.OnFailPayload, arg.OnFailHeaders = fail.queue, &fail.topic, fail.payload, fail.headers
		arg.OnFailPartitionKey, arg.OnFailCorrelationID = fail.partition, fail.correlation
	}
	if !s.Deadline.IsZero() {
		d := s.Deadline
		arg.Deadline = &d
	}
	if s.Timeout > 0 {
		ms := int64(math.Ceil(float64(s.Timeout) / float64(time.Millisecond)))
		arg.TimeoutMs = &ms
	}
	return arg, nil
}

// ValidateJoin reports what is wrong with s (an error wrapping
// workqtype.ErrInvalid), or nil when StartJoin would accept it. It touches no
// database.
func ValidateJoin(s outbox.JoinSpec) error {
	_, err := prepareJoin(s)
	return err
}

// StartJoin creates an open join on db (a pool, or the caller's transaction:
// the join exists if and only if that transaction commits). Attach members by
// writing outbox messages with the returned join's ID, in the same
// transaction or later ones, up to s.Expected of them. Invalid specs return an
// error wrapping workqtype.ErrInvalid and write nothing.
func StartJoin(ctx context.Context, db workqtype.DB, s outbox.JoinSpec) (outbox.Join, error) {
	arg, err := prepareJoin(s)
	if err != nil {
		return outbox.Join{}, err
	}
	row, err := gen.New(db).OutboxJoinStart(ctx, arg)
	if err != nil {
		return outbox.Join{}, fmt.Errorf("start join: %w", err)
	}
	j := outbox.Join{
		ID: row.ID, Status: outbox.JoinStatus(row.Status), OnMemberFailure: s.OnMemberFailure,
		Expected: int(row.ExpectedSteps), CreatedAt: row.CreatedAt, UpdatedAt: row.CreatedAt,
	}
	if row.Deadline != nil {
		j.Deadline = *row.Deadline
	}
	return j, nil
}

// GetJoin reads a join's counts, status and timestamps. An unknown id
// returns an error wrapping ErrJoinNotFound.
func GetJoin(ctx context.Context, db workqtype.DB, id int64) (outbox.Join, error) {
	r, err := gen.New(db).OutboxJoinGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return outbox.Join{}, fmt.Errorf("get join %d: %w", id, outbox.ErrJoinNotFound)
	}
	if err != nil {
		return outbox.Join{}, fmt.Errorf("get join %d: %w", id, err)
	}
	return joinOf(r), nil
}

// joinOf maps a join row (OutboxJoinGet's columns) to a Join.
func joinOf(r gen.OutboxJoinGetRow) outbox.Join {
	j := outbox.Join{
		ID: r.ID, Status: outbox.JoinStatus(r.Status), OnMemberFailure: outbox.MemberFailure(r.OnMemberFailure),
		Expected: int(r.ExpectedSteps), Attached: int(r.AttachedSteps), Completed: int(r.CompletedSteps),
		Failed: int(r.FailedSteps), OnCompleteTopic: r.OnCompleteTopic, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.FailReason != nil {
		j.FailReason = *r.FailReason
	}
	if r.OnFailTopic != nil {
		j.OnFailTopic = *r.OnFailTopic
	}
	if r.Deadline != nil {
		j.Deadline = *r.Deadline
	}
	if r.OutcomeMessageID != nil {
		j.OutcomeMessageID = *r.OutcomeMessageID
	}
	if r.FinishedAt != nil {
		j.FinishedAt = *r.FinishedAt
	}
	return j
}

// JoinQuery selects a page of joins, newest first.
type JoinQuery struct {
	OnlyOpen bool  // only joins still waiting for members
	Before   int64 // keyset pagination: joins with smaller ids (0: from the newest)
	Limit    int   // at most this many (0: 50; at most 1000)
}

// ListJoins lists joins newest first with their counts (Join.Completed and
// Join.Failed of Join.Expected are the progress), walking the primary key
// down from q.Before.
func ListJoins(ctx context.Context, db workqtype.DB, q JoinQuery) ([]outbox.Join, error) {
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.Limit < 0 || q.Limit > 1000 || q.Before < 0 {
		return nil, fmt.Errorf("%w: list joins: limit %d (want 1 to 1000), before %d", workqtype.ErrInvalid, q.Limit, q.Before)
	}
	before := int64(math.MaxInt64)
	if q.Before > 0 {
		before = q.Before
	}
	rows, err := gen.New(db).OutboxJoinsPage(ctx, gen.OutboxJoinsPageParams{BeforeID: before, OnlyOpen: q.OnlyOpen, MaxRows: int32(q.Limit)})
	if err != nil {
		return nil, fmt.Errorf("list joins: %w", err)
	}
	out := make([]outbox.Join, len(rows))
	for i, r := range rows {
		out[i] = joinOf(gen.OutboxJoinGetRow(r))
	}
	return out, nil
}

// FailExpiredJoins fails up to max open joins whose deadline has passed on
// the database clock, each writing its on-fail message (if it has one) once,
// and returns how many it failed. It is one short statement that skips joins
// locked by a member that is ending them right now (whichever commits first
// decides the join; the other finds it ended), so it is idempotent and safe
// to run from several processes at once. Call it again while it returns max.
func FailExpiredJoins(ctx context.Context, db workqtype.DB, max int) (int, error) {
	if max < 1 {
		return 0, fmt.Errorf("%w: fail expired joins: max must be at least 1, got %d", workqtype.ErrInvalid, max)
	}
	n, err := gen.New(db).OutboxJoinFailExpired(ctx, int32(min(max, math.MaxInt32)))
	if err != nil {
		return 0, fmt.Errorf("fail expired joins: %w", err)
	}
	return int(n), nil
}

// JoinError maps the database's refusal to attach an outbox message to a
// join (raised by the triggers of db/migrations/00004_outbox_joins.sql) to
// ErrJoinNotFound, ErrJoinEnded, ErrJoinFull, ErrJoinMemberFinished or
// ErrJoinFixed, keeping err in the chain; any other error is returned as it
// is. The outbox write API runs its errors through it.
func JoinError(err error) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return err
	}
	var sentinel error
	switch pg.Code {
	case "WQJ01":
		sentinel = outbox.ErrJoinNotFound
	case "WQJ02":
		sentinel = outbox.ErrJoinEnded
	case "WQJ03":
		sentinel = outbox.ErrJoinFull
	case "WQJ04":
		sentinel = outbox.ErrJoinMemberFinished
	case "WQJ05":
		sentinel = outbox.ErrJoinFixed
	}
	if sentinel == nil {
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}
