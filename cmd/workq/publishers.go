package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/redact"
	"github.com/workq/workq/publish"
)

// publisher is an outbox handler that delivers a message elsewhere
// (publish.Webhook.Handle, publish.JetStream.Handle).
type publisher = func(ctx context.Context, m *workq.Message[json.RawMessage]) error

// publisherSet is the publishers publishersFromConfig built: a handler per
// topic, and the NATS connection they share (when a JetStream publisher is
// configured).
type publisherSet struct {
	// Handlers maps each configured topic to its publisher; register each
	// with workq.HandleOutbox under its topic.
	Handlers map[string]publisher
	nc       *nats.Conn
}

// Topics lists the configured topics, sorted.
func (s *publisherSet) Topics() []string {
	out := make([]string, 0, len(s.Handlers))
	for k := range s.Handlers {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Close drains and closes the NATS connection, if any. Call it after the
// worker has stopped.
func (s *publisherSet) Close() {
	if s != nil && s.nc != nil {
		_ = s.nc.Drain()
		s.nc = nil
	}
}

// publishersFromConfig builds the publishers of cfg's --outbox-webhook and
// --outbox-nats settings: webhooks signed with OutboxWebhookSecret under the
// scheme OutboxWebhookSignature, allowed hosts WebhookAllow, timeout
// WebhookTimeout; JetStream publishers on one connection to NATSURL, subject per entry (TOPIC=SUBJECT) or mapped from
// the topic under OutboxNATSPrefix, timeout NATSTimeout. With no publisher
// configured it returns an empty set. Configuration errors wrap workq.ErrInvalid;
// a NATS server that cannot be reached is an error too (the worker should
// not start relaying topics it cannot deliver).
func publishersFromConfig(cfg config.Config, log *slog.Logger) (*publisherSet, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pubs, err := cfg.OutboxPublishers()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", workq.ErrInvalid, err)
	}
	s := &publisherSet{Handlers: map[string]publisher{}}
	var js jetstream.JetStream
	for _, p := range pubs {
		switch p.Kind {
		case config.PublisherWebhook:
			w, err := publish.NewWebhook(publish.WebhookConfig{URL: p.URL, Secret: cfg.OutboxWebhookSecret,
				Signature:  publish.WebhookSignature(cfg.OutboxWebhookSignature),
				AllowHosts: cfg.WebhookAllow, Timeout: cfg.WebhookTimeout})
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("outbox-webhook %s: %w", p.Topic, err)
			}
			s.Handlers[p.Topic] = w.Handle
		case config.PublisherNATS:
			if js == nil {
				s.nc, err = nats.Connect(cfg.NATSURL,
					nats.Name("workq "+cfg.WorkerID),
					nats.MaxReconnects(-1),
					nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("nats disconnected", "err", err) }),
					nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }))
				if err != nil {
					return nil, fmt.Errorf("outbox-nats: connect to %s: %w", redact.URL(cfg.NATSURL), err)
				}
				if js, err = jetstream.New(s.nc); err != nil {
					s.Close()
					return nil, fmt.Errorf("outbox-nats: %w", err)
				}
			}
			jc := publish.JetStreamConfig{Prefix: cfg.OutboxNATSPrefix, Timeout: cfg.NATSTimeout}
			if p.Subject != "" {
				subj := p.Subject
				jc.Subject = func(string) string { return subj }
			}
			j, err := publish.NewJetStream(js, jc)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("outbox-nats %s: %w", p.Topic, err)
			}
			s.Handlers[p.Topic] = j.Handle
		}
	}
	return s, nil
}
