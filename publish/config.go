package publish

import (
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/redact"
	"github.com/workq/workq/internal/worker"
)

// Set is the publishers FromConfig built: a handler per topic, and the NATS
// connection they share (when a JetStream publisher is configured).
type Set struct {
	// Handlers maps each configured topic to its publisher; register each
	// with the outbox relay (or a worker.Router) under its topic.
	Handlers map[string]worker.HandlerFunc
	nc       *nats.Conn
}

// Topics lists the configured topics, sorted.
func (s *Set) Topics() []string { return sortedKeys(s.Handlers) }

// Close drains and closes the NATS connection, if any. Call it after the
// worker has stopped.
func (s *Set) Close() {
	if s != nil && s.nc != nil {
		_ = s.nc.Drain()
		s.nc = nil
	}
}

// FromConfig builds the publishers of cfg's --outbox-webhook and
// --outbox-nats settings: webhooks signed with OutboxWebhookSecret under the
// scheme OutboxWebhookSignature, allowed hosts WebhookAllow, timeout
// WebhookTimeout; JetStream publishers on one connection to NATSURL, subject per entry (TOPIC=SUBJECT) or mapped from
// the topic under OutboxNATSPrefix, timeout NATSTimeout. With no publisher
// configured it returns an empty Set. Configuration errors wrap ErrInvalid;
// a NATS server that cannot be reached is an error too (the worker should
// not start relaying topics it cannot deliver).
func FromConfig(cfg config.Config, log *slog.Logger) (*Set, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pubs, err := cfg.OutboxPublishers()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	s := &Set{Handlers: map[string]worker.HandlerFunc{}}
	var js jetstream.JetStream
	for _, p := range pubs {
		switch p.Kind {
		case config.PublisherWebhook:
			w, err := NewWebhook(WebhookConfig{URL: p.URL, Secret: cfg.OutboxWebhookSecret,
				Signature:  WebhookSignature(cfg.OutboxWebhookSignature),
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
			jc := JetStreamConfig{Prefix: cfg.OutboxNATSPrefix, Timeout: cfg.NATSTimeout}
			if p.Subject != "" {
				subj := p.Subject
				jc.Subject = func(string) string { return subj }
			}
			j, err := NewJetStream(js, jc)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("outbox-nats %s: %w", p.Topic, err)
			}
			s.Handlers[p.Topic] = j.Handle
		}
	}
	return s, nil
}
