package outbox

// Fan-in joins: a join expects N member messages and, when all of them have
// ended, writes one outcome message into the outbox. The counting and the
// outcome live in the database (db/migrations/00004_outbox_joins.sql): the
// statements that end members count them through a trigger, so there is no
// polling and no window. docs/outbox_joins.md explains the design.

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/workqtype"
)

// Errors of joins. Writing a member message can fail with the first five
// (the error keeps the database's in its chain); reading an unknown
// join (workq.Client.GetJoin) returns ErrJoinNotFound.
var (
	ErrJoinNotFound       = fmt.Errorf("join %w", workqtype.ErrNotFound)
	ErrJoinEnded          = errors.New("join has ended")                               // members attach only to open joins
	ErrJoinFull           = errors.New("join has all its members")                     // more members than the join expects
	ErrJoinMemberFinished = errors.New("a finished message cannot join")               // members attach when written, before they run
	ErrJoinFixed          = errors.New("a message's join is fixed when it is written") // join_id never changes
)

// MemberFailure says what a member that failed does to its join.
type MemberFailure int16

// Member failure policies.
const (
	// IgnoreFailures: the join completes (writes its on-complete message)
	// when every member has ended, whatever their outcomes. The counts tell
	// how many failed.
	IgnoreFailures MemberFailure = 0
	// FailWhenDone: the join waits for every member to end and fails if one
	// of them failed.
	FailWhenDone MemberFailure = 1
	// FailFast: the first failed member fails the join at once; members that
	// end later are still counted.
	FailFast MemberFailure = 2
)

func (m MemberFailure) String() string {
	switch m {
	case IgnoreFailures:
		return "ignore"
	case FailWhenDone:
		return "fail_when_done"
	case FailFast:
		return "fail_fast"
	}
	return fmt.Sprintf("member_failure(%d)", int16(m))
}

// JoinStatus is a join's state.
type JoinStatus int16

// Join states (the values stored in outbox_joins.status).
const (
	JoinOpen      JoinStatus = 0
	JoinCompleted JoinStatus = 2
	JoinFailed    JoinStatus = 3
)

func (s JoinStatus) String() string {
	switch s {
	case JoinOpen:
		return "open"
	case JoinCompleted:
		return "completed"
	case JoinFailed:
		return "failed"
	}
	return fmt.Sprintf("join_status(%d)", int16(s))
}

// Why a join failed (Join.FailReason), also the value of the
// "workq-join-outcome" header of the outcome message ("completed" when it
// completed).
const (
	JoinReasonMemberFailed = "member_failed"
	JoinReasonDeadline     = "deadline"
)

// Headers the join adds to its outcome message (the spec's headers plus these).
const (
	HeaderJoinID      = "workq-join-id"
	HeaderJoinOutcome = "workq-join-outcome"
)

// JoinMessage is the message a join writes into the outbox when it ends.
type JoinMessage struct {
	Topic         string            // required, 1 to 256 characters
	Payload       any               // a JSON object: a struct or map to marshal, or raw JSON as json.RawMessage or []byte; nil means {}
	Headers       map[string]string // optional
	Queue         string            // default "default"
	PartitionKey  string            // optional, at most 256 characters
	CorrelationID string            // optional
}

// JoinSpec describes a join to start.
type JoinSpec struct {
	// Expected is the number of member messages the join waits for (>= 1).
	// Members are outbox messages written with the join's id; at most
	// Expected may be attached.
	Expected   int
	OnComplete JoinMessage  // written when every member has ended (and the policy does not fail the join)
	OnFail     *JoinMessage // written when the join fails; nil: a failed join writes nothing
	// OnMemberFailure: what a failed member does (IgnoreFailures by default).
	OnMemberFailure MemberFailure
	// Deadline, if set, fails the join when it is still open at that time
	// (the Client's maintenance enforces it). Set Deadline or Timeout, not both.
	Deadline time.Time
	// Timeout sets the deadline to now + Timeout on the database clock.
	Timeout time.Duration
}

// Join is a join's state as stored.
type Join struct {
	ID              int64
	Status          JoinStatus
	FailReason      string // JoinReasonMemberFailed or JoinReasonDeadline when Status is JoinFailed
	OnMemberFailure MemberFailure
	Expected        int       // members the join waits for
	Attached        int       // members written so far
	Completed       int       // members done
	Failed          int       // members failed (including members deleted before they ended)
	Deadline        time.Time // zero: none
	// OutcomeMessageID is the message id of the outcome message the join
	// wrote (zero while open, or when it failed without an on-fail message).
	OutcomeMessageID uuid.UUID
	OnCompleteTopic  string // the topic of the on-complete message (workq.Client.GetJoin)
	OnFailTopic      string // the topic of the on-fail message ("": none)
	CreatedAt        time.Time
	UpdatedAt        time.Time
	FinishedAt       time.Time // zero while open
}
