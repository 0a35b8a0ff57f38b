// Package inboxrt is the inbox's runtime: the Client that records
// received messages (package inbox holds the types a user names), the
// Processor of claimed messages, and the operator reads and writes (Get,
// List, Attempts, Revive, DeleteProcessed). A workq.Client, the HTTP API,
// the dashboard and the CLI use it; users do not.
package inboxrt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/notify"
	"github.com/workq/workq/internal/topicproc"
	"github.com/workq/workq/workqtype"
)

// Client receives messages. It is safe for concurrent use; share one per
// process so NOTIFY debouncing works across goroutines.
type Client struct {
	maxAttempts int
	maxPayload  int
	notify      *notify.Debouncer
}

// ClientOptions configure a Client; zero values take the defaults.
type ClientOptions struct {
	MaxAttempts    int           // default max attempts of messages that do not set one (4)
	NotifyDebounce time.Duration // at most one NOTIFY per queue per this (5ms); negative disables NOTIFY
	// MaxPayloadBytes limits a message's payload as jobq.Options
	// limits a job's: 0 means workqtype.DefaultMaxPayload (1 MiB).
	MaxPayloadBytes int
}

// NewClient returns a Client.
func NewClient(o ClientOptions) *Client {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = workqtype.DefaultMaxAttempts
	}
	if o.NotifyDebounce == 0 {
		o.NotifyDebounce = workqtype.DefaultNotifyDebounce
	}
	if o.MaxPayloadBytes == 0 {
		o.MaxPayloadBytes = workqtype.DefaultMaxPayload
	}
	return &Client{maxAttempts: o.MaxAttempts, maxPayload: o.MaxPayloadBytes, notify: notify.New(o.NotifyDebounce)}
}

type prepared struct {
	queue, source, messageID, topic string
	payload                         []byte
	priority                        int16
	maxAttempts                     int32
}

// checkText validates a required text key (source, message id).
func checkText(field, what, s string, maxLen int) error {
	switch {
	case s == "":
		return workqtype.Invalid(field, what+" is required")
	case len(s) > maxLen:
		return workqtype.Invalid(field, fmt.Sprintf("%s is %d bytes, more than %d", what, len(s), maxLen))
	case !utf8.ValidString(s):
		return workqtype.Invalid(field, what+" is not valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return workqtype.Invalid(field, what+" contains a NUL byte")
	}
	return nil
}

func (c *Client) prepare(m inbox.Message) (prepared, error) {
	p := prepared{queue: m.Queue, source: m.Source, messageID: m.MessageID, topic: m.Topic, priority: m.Priority}
	if p.queue == "" {
		p.queue = workqtype.DefaultQueue
	}
	if err := workqtype.CheckQueue("queue", p.queue); err != nil {
		return p, err
	}
	if err := checkText("source", "source", p.source, 256); err != nil {
		return p, err
	}
	if err := checkText("message_id", "message id", p.messageID, 512); err != nil {
		return p, err
	}
	if p.topic != "" && !workqtype.ValidTopic(p.topic) {
		return p, workqtype.Invalid("topic", fmt.Sprintf("topic %q is not valid (1-256 bytes of UTF-8 without control characters; empty for none)", p.topic))
	}
	payload, err := workqtype.EncodePayload(m.Payload, c.maxPayload)
	if err != nil {
		return p, err
	}
	p.payload = payload
	p.maxAttempts, err = workqtype.MaxAttempts("max_attempts", m.MaxAttempts, c.maxAttempts)
	return p, err
}

// Validate reports what is wrong with m (an error wrapping workqtype.ErrInvalid),
// or nil when Receive would accept it. It touches no database.
func (c *Client) Validate(m inbox.Message) error {
	_, err := c.prepare(m)
	return err
}

// Receive records one message on db (a pool, or the caller's transaction:
// then the receipt exists only if that transaction commits). The first
// receipt of (m.Source, m.MessageID) inserts it for processing; a repeat with
// the same payload hash returns Duplicate (and Processed when the stored
// message is done) and changes nothing; a repeat with another payload hash
// returns the stored id with Conflict set and an error wrapping ErrConflict
// (a *ConflictError), and changes nothing. A duplicate never writes or
// locks the stored row. Validation errors wrap workqtype.ErrInvalid.
func (c *Client) Receive(ctx context.Context, db workqtype.DB, m inbox.Message) (inbox.Received, error) {
	out, err := c.ReceiveMany(ctx, db, []inbox.Message{m})
	if len(out) != 1 {
		return inbox.Received{}, err
	}
	var ce *inbox.ConflictError
	if errors.As(err, &ce) {
		return out[0], ce
	}
	return out[0], err
}

// maxLookups bounds how often ReceiveMany looks again for keys whose stored
// row its statement could not see (stored by a transaction that committed
// after the statement began, or deleted by the de-duplication window in
// between). Each round needs a further concurrent commit on the same key.
const maxLookups = 5

// ReceiveMany records many messages in one statement on db and returns one
// result per message, in input order. Each message is judged as Receive
// judges it, against the stored message of its key; a (source, message id)
// that occurs more than once in the batch is stored once, from its first
// occurrence: the later occurrences are duplicates of it, or conflicts when
// their payload hash differs from the stored one. Ids of the new messages
// of one batch follow the order of their keys, not the input order.
//
// A batch with an invalid message is rejected whole (an error wrapping
// workqtype.ErrInvalid, nothing written). Conflicts do not stop the batch: the
// other messages are received, every result is returned, and the error
// joins one *ConflictError per conflicting message (errors.Is(err,
// ErrConflict)). A caller that wants all or nothing receives inside its
// transaction and rolls back on that error.
func (c *Client) ReceiveMany(ctx context.Context, db workqtype.DB, msgs []inbox.Message) ([]inbox.Received, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	n := len(msgs)
	arg := gen.InboxReceiveParams{
		Queues: make([]string, n), Sources: make([]string, n), MessageIds: make([]string, n), Topics: make([]string, n),
		Payloads: make([]string, n), Priorities: make([]int16, n), MaxAttempts: make([]int32, n),
	}
	queues := map[string]bool{}
	for i, m := range msgs {
		p, err := c.prepare(m)
		if err != nil {
			if n == 1 {
				return nil, fmt.Errorf("receive: %w", err)
			}
			return nil, fmt.Errorf("receive: message %d: %w", i, err)
		}
		arg.Queues[i], arg.Sources[i], arg.MessageIds[i], arg.Topics[i] = p.queue, p.source, p.messageID, p.topic
		arg.Payloads[i], arg.Priorities[i], arg.MaxAttempts[i] = string(p.payload), p.priority, p.maxAttempts
		queues[p.queue] = true
	}
	for queue := range queues {
		if c.notify.Should(queue) {
			arg.Notify = true
		}
	}
	q := gen.New(db)
	out := make([]inbox.Received, n)
	hashes := make([][]byte, n)
	// pending lists the inputs whose stored row is still unknown.
	pending := make([]int, n)
	for i := range pending {
		pending[i] = i
	}
	for try := 0; len(pending) > 0; try++ {
		if try == maxLookups {
			return nil, fmt.Errorf("receive %d messages: %d still unsettled after %d tries (their keys are being stored and deleted concurrently)", n, len(pending), try)
		}
		sub := arg
		if len(pending) < n {
			sub = subset(arg, pending)
		}
		rows, err := q.InboxReceive(ctx, sub)
		if err != nil {
			return nil, fmt.Errorf("receive %d messages: %w", n, err)
		}
		if len(rows) != len(pending) {
			return nil, fmt.Errorf("receive %d messages: %d rows returned", len(pending), len(rows))
		}
		var unseen []int
		for k, r := range rows {
			i := pending[k]
			hashes[i] = r.PayloadHash
			if r.ID == 0 {
				unseen = append(unseen, i)
				continue
			}
			out[i] = result(r.ID, lease.Status(r.Status), r.Inserted, r.SamePayload)
		}
		if len(unseen) == 0 {
			break
		}
		// A new statement sees what committed since the receive began.
		var sources, ids []string
		for _, i := range unseen {
			sources = append(sources, arg.Sources[i])
			ids = append(ids, arg.MessageIds[i])
		}
		found, err := q.InboxLookup(ctx, sources, ids)
		if err != nil {
			return nil, fmt.Errorf("receive %d messages: look up concurrently stored keys: %w", n, err)
		}
		type key struct{ source, id string }
		stored := make(map[key]gen.InboxLookupRow, len(found))
		for _, f := range found {
			stored[key{f.Source, f.MessageID}] = f
		}
		pending = pending[:0]
		for _, i := range unseen {
			f, ok := stored[key{arg.Sources[i], arg.MessageIds[i]}]
			if !ok {
				pending = append(pending, i) // deleted meanwhile: receive it again
				continue
			}
			out[i] = result(f.ID, lease.Status(f.Status), false, bytes.Equal(f.PayloadHash, hashes[i]))
		}
	}
	var conflicts []error
	for i, r := range out {
		if r.Conflict {
			conflicts = append(conflicts, &inbox.ConflictError{Index: i, Source: arg.Sources[i], MessageID: arg.MessageIds[i], ID: r.ID})
		}
	}
	if len(conflicts) > 0 {
		return out, fmt.Errorf("receive %d messages: %d conflict(s): %w", n, len(conflicts), errors.Join(conflicts...))
	}
	return out, nil
}

func result(id int64, st lease.Status, inserted, same bool) inbox.Received {
	switch {
	case inserted:
		return inbox.Received{ID: id, Status: StatusName(st)}
	case same:
		return inbox.Received{ID: id, Status: StatusName(st), Duplicate: true, Processed: st == lease.StatusDone}
	default:
		return inbox.Received{ID: id, Status: StatusName(st), Conflict: true}
	}
}

// subset returns the receive parameters of the inputs idx.
func subset(a gen.InboxReceiveParams, idx []int) gen.InboxReceiveParams {
	s := gen.InboxReceiveParams{Notify: a.Notify}
	for _, i := range idx {
		s.Queues = append(s.Queues, a.Queues[i])
		s.Sources = append(s.Sources, a.Sources[i])
		s.MessageIds = append(s.MessageIds, a.MessageIds[i])
		s.Topics = append(s.Topics, a.Topics[i])
		s.Payloads = append(s.Payloads, a.Payloads[i])
		s.Priorities = append(s.Priorities, a.Priorities[i])
		s.MaxAttempts = append(s.MaxAttempts, a.MaxAttempts[i])
	}
	return s
}

// NotifyChannel is the LISTEN/NOTIFY channel the inbox wakes its workers
// on in the default schema (workqtype.NotifyChannel for another); the
// payload is the queue.
var NotifyChannel = workqtype.NotifyChannel("", string(lease.Inbox))

// NewProcessor returns the inbox's Processor without handlers: it routes
// claimed messages to handlers by topic. A handler's nil marks the message
// processed (done), an error retries it with backoff until its attempts
// are used up and it is dead (failed), worker.Permanent(err) makes it dead
// at once.
func NewProcessor() *topicproc.Processor { return topicproc.New(lease.Inbox, nil) }
