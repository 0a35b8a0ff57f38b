package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/workq/workq/workqtype"

	"github.com/workq/workq/internal/subject"
	"github.com/workq/workq/internal/whsec"
)

// PublisherFlags are the settings of the built-in outbox publishers, for
// commands that run the outbox relay (`workq worker --outbox`); they also
// need "webhook-allow" and "webhook-timeout".
var PublisherFlags = []string{
	"outbox-webhook", "outbox-webhook-secret", "outbox-webhook-signature", "nats-url", "outbox-nats", "outbox-nats-prefix", "nats-timeout",
}

// The signature schemes of outbox webhooks (OutboxWebhookSignature; package
// publish's SignatureWorkq and SignatureStandard).
const (
	WebhookSignatureWorkq    = "workq"
	WebhookSignatureStandard = "standard"
)

// Publisher kinds.
const (
	PublisherWebhook = "webhook"
	PublisherNATS    = "nats"
)

// OutboxPublisher is one topic's built-in publisher, parsed from
// --outbox-webhook or --outbox-nats.
type OutboxPublisher struct {
	Topic   string
	Kind    string // PublisherWebhook or PublisherNATS
	URL     string // webhook
	Subject string // nats: explicit subject, "" = mapped from the topic under OutboxNATSPrefix
}

// OutboxPublishers parses the publisher settings; each problem is one
// error, joined.
func (c Config) OutboxPublishers() ([]OutboxPublisher, error) {
	out, errs := c.parsePublishers()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func (c Config) validatePublishers() []error {
	_, errs := c.parsePublishers()
	return errs
}

func (c Config) parsePublishers() ([]OutboxPublisher, []error) {
	var out []OutboxPublisher
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]string{}
	claim := func(topic, flag string) bool {
		if !workqtype.ValidTopic(topic) {
			bad("%s entry: topic %q is not a valid topic (1-256 bytes of UTF-8, no control characters)", flag, topic)
			return false
		}
		if prev, dup := seen[topic]; dup {
			bad("%s: topic %q already has a publisher (from %s)", flag, topic, prev)
			return false
		}
		seen[topic] = flag
		return true
	}
	allow := map[string]bool{}
	for _, h := range c.WebhookAllow {
		allow[strings.ToLower(h)] = true
	}
	for _, e := range c.OutboxWebhooks {
		topic, raw, ok := strings.Cut(e, "=")
		if !ok {
			bad("outbox-webhook entry %q must be TOPIC=URL", e)
			continue
		}
		if !claim(topic, "outbox-webhook") {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			bad("outbox-webhook %s: %q is not an http or https URL", topic, raw)
			continue
		}
		if u.User != nil {
			bad("outbox-webhook %s: credentials in the URL are not allowed", topic)
			continue
		}
		host := strings.ToLower(u.Hostname())
		hostport := host
		if u.Port() != "" {
			hostport = net.JoinHostPort(host, u.Port())
		}
		if !allow[host] && !allow[hostport] {
			bad("outbox-webhook %s: host %q is not in --webhook-allow", topic, hostport)
			continue
		}
		out = append(out, OutboxPublisher{Topic: topic, Kind: PublisherWebhook, URL: raw})
	}
	if len(c.OutboxWebhooks) > 0 && c.OutboxWebhookSecret == "" {
		bad("outbox-webhook needs outbox-webhook-secret (receivers verify the signature with it)")
	}
	switch c.OutboxWebhookSignature {
	case WebhookSignatureWorkq:
	case WebhookSignatureStandard:
		if len(c.OutboxWebhooks) > 0 && c.OutboxWebhookSecret != "" {
			if _, err := whsec.Parse(c.OutboxWebhookSecret); err != nil {
				bad("outbox-webhook-secret with --outbox-webhook-signature standard must be whsec_<base64>, several separated by spaces: %v", err)
			}
		}
	default:
		bad("outbox-webhook-signature %q must be %s or %s", c.OutboxWebhookSignature, WebhookSignatureWorkq, WebhookSignatureStandard)
	}
	if !subject.ValidPrefix(c.OutboxNATSPrefix) {
		bad("outbox-nats-prefix %q is not a valid NATS subject (dot-separated tokens without spaces or wildcards)", c.OutboxNATSPrefix)
	}
	for _, e := range c.OutboxNATS {
		topic, subj, explicit := strings.Cut(e, "=")
		if !claim(topic, "outbox-nats") {
			continue
		}
		if explicit && !subject.Valid(subj) {
			bad("outbox-nats %s: subject %q is not a valid NATS subject (dot-separated tokens without spaces or wildcards)", topic, subj)
			continue
		}
		out = append(out, OutboxPublisher{Topic: topic, Kind: PublisherNATS, Subject: subj})
	}
	if len(c.OutboxNATS) > 0 && strings.TrimSpace(c.NATSURL) == "" {
		bad("outbox-nats needs nats-url")
	}
	if c.NATSTimeout <= 0 {
		bad("nats-timeout must be positive, got %s", c.NATSTimeout)
	}
	return out, errs
}
