package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/subject"
)

// DefaultJetStreamTimeout is how long a publish waits for the stream's ack
// when JetStreamConfig.Timeout is zero.
const DefaultJetStreamTimeout = 5 * time.Second

// JetStreamConfig configures a JetStream publisher.
type JetStreamConfig struct {
	// Subject maps a message's topic to the subject it is published to.
	// When nil, the subject is SubjectFor(Prefix, topic). A subject it
	// returns that NATS cannot publish to fails the message for good.
	Subject func(topic string) string
	// Prefix is put in front of the mapped topic when Subject is nil; ""
	// or a valid subject without wildcards.
	Prefix string
	// Timeout bounds one publish including its ack; 0 = DefaultJetStreamTimeout.
	Timeout time.Duration
}

// SubjectFor is the default topic-to-subject mapping: the topic's dots stay
// token separators, every character a subject cannot hold (whitespace,
// control characters, the wildcards '*' and '>') becomes '_', an empty token
// becomes "_", and a non-empty prefix is joined in front with a dot. So
// "orders.created" under prefix "workq" is "workq.orders.created", and
// "a b" is "a_b". The mapping is not one-to-one ("a b" and "a_b" meet):
// choose topics that need no mapping, or set JetStreamConfig.Subject.
func SubjectFor(prefix, topic string) string { return subject.FromTopic(prefix, topic) }

// JetStream publishes outbox messages to a JetStream stream.
type JetStream struct {
	js      jetstream.JetStream
	subject func(string) string
	timeout time.Duration
}

// NewJetStream returns the publisher; register its Handle method for a
// topic with workq.HandleOutbox. Errors wrap workq.ErrInvalid. The stream that captures the
// subjects must exist (it is the operator's: its duplicate window bounds the
// de-duplication, see Handle).
func NewJetStream(js jetstream.JetStream, c JetStreamConfig) (*JetStream, error) {
	if js == nil {
		return nil, invalid("jetstream: nil JetStream")
	}
	if c.Timeout < 0 {
		return nil, invalid("jetstream: timeout must not be negative, got %s", c.Timeout)
	}
	if !subject.ValidPrefix(c.Prefix) {
		return nil, invalid("jetstream: prefix %q is not a valid subject (dot-separated tokens without spaces or wildcards)", c.Prefix)
	}
	p := &JetStream{js: js, subject: c.Subject, timeout: c.Timeout}
	if p.subject == nil {
		prefix := c.Prefix
		p.subject = func(topic string) string { return subject.FromTopic(prefix, topic) }
	}
	if p.timeout == 0 {
		p.timeout = DefaultJetStreamTimeout
	}
	return p, nil
}

// The headers a JetStream message carries besides the message's own
// (Nats-Msg-Id is jetstream.MsgIDHeader).
const (
	NATSHeaderTopic         = "Workq-Topic"
	NATSHeaderCorrelationID = "Workq-Correlation-Id"
	NATSHeaderPartitionKey  = "Workq-Partition-Key"
)

// Handle publishes the message's payload to the topic's subject with the
// message's headers, Nats-Msg-Id set to the outbox message id, and waits
// for the stream's ack. The id makes JetStream drop a second copy of the
// same message (a retry after a lost ack, or an attempt that runs again
// because its completion was lost) within the stream's duplicate window;
// such a duplicate ack counts as success. No stream for the subject, a
// timeout or any server error retries; a subject NATS cannot publish to, a
// message over the server's size limit or headers NATS cannot carry fail
// the message for good. Message headers named Nats-* or Workq-* are not
// copied: the publisher owns them.
func (p *JetStream) Handle(ctx context.Context, job *workq.Message[json.RawMessage]) error {
	subj := p.subject(job.Topic)
	if !subject.Valid(subj) {
		return workq.Permanent(fmt.Errorf("jetstream: topic %q maps to %q, not a subject NATS can publish to", job.Topic, subj))
	}
	src, err := messageHeaders(job.Headers)
	if err != nil {
		return workq.Permanent(fmt.Errorf("jetstream: %w", err))
	}
	msg := nats.NewMsg(subj)
	msg.Data = job.Payload
	var dropped []string
	for k, vs := range src {
		if err := checkNATSHeader(k, vs); err != nil {
			return workq.Permanent(fmt.Errorf("jetstream: %w", err))
		}
		if l := strings.ToLower(k); strings.HasPrefix(l, "nats-") || strings.HasPrefix(l, "workq-") {
			dropped = append(dropped, k)
			continue
		}
		msg.Header[k] = vs
	}
	if len(dropped) > 0 {
		job.Logger().Warn("jetstream: reserved message headers not sent", "headers", dropped)
	}
	msg.Header.Set(NATSHeaderTopic, job.Topic)
	if job.CorrelationID != "" {
		msg.Header.Set(NATSHeaderCorrelationID, job.CorrelationID)
	}
	if job.PartitionKey != "" {
		msg.Header.Set(NATSHeaderPartitionKey, job.PartitionKey)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// A duplicate ack (PubAck.Duplicate: the stream already holds this
	// message id) is success: the message is in the stream once.
	_, err = p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(job.MessageID))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("jetstream: publish to %q: no stream captures the subject (or none answered): %w", subj, err)
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrHeadersNotSupported):
		return workq.Permanent(fmt.Errorf("jetstream: publish to %q: %w", subj, err))
	default:
		return fmt.Errorf("jetstream: publish to %q: %w", subj, err)
	}
}

// checkNATSHeader rejects what the NATS header block cannot carry: an empty
// name, a name with ':', whitespace or control characters, a value with
// control characters.
func checkNATSHeader(k string, vs []string) error {
	if k == "" {
		return errors.New("empty header name")
	}
	for _, r := range k {
		if r == ':' || r <= ' ' || r == 0x7f {
			return fmt.Errorf("header name %q cannot be sent over NATS", k)
		}
	}
	for _, v := range vs {
		for i := 0; i < len(v); i++ {
			if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
				return fmt.Errorf("header %s: value %q has control characters", k, v)
			}
		}
	}
	return nil
}
