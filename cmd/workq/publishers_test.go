package main

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
)

// TestPublishersConfigValidate: each bad publisher setting is a Validate error that
// names it, and publishersFromConfig refuses it with ErrInvalid.
func TestPublishersConfigValidate(t *testing.T) {
	base := func() config.Config {
		c := config.Default()
		c.WebhookAllow = []string{"hooks.example.com", "127.0.0.1:8080"}
		c.OutboxWebhookSecret = "s"
		c.NATSURL = natsURL
		return c
	}
	cases := []struct {
		name   string
		edit   func(c *config.Config)
		errHas string
	}{
		{"webhook without =", func(c *config.Config) { c.OutboxWebhooks = []string{"orders"} }, "TOPIC=URL"},
		{"webhook host not allowed", func(c *config.Config) { c.OutboxWebhooks = []string{"orders=https://evil.example/x"} }, `"evil.example" is not in --webhook-allow`},
		{"webhook other port", func(c *config.Config) { c.OutboxWebhooks = []string{"orders=http://127.0.0.1:9090/x"} }, "127.0.0.1:9090"},
		{"webhook not http", func(c *config.Config) { c.OutboxWebhooks = []string{"orders=ftp://hooks.example.com/x"} }, "not an http or https URL"},
		{"webhook without secret", func(c *config.Config) {
			c.OutboxWebhooks = []string{"orders=https://hooks.example.com/x"}
			c.OutboxWebhookSecret = ""
		}, "outbox-webhook-secret"},
		{"empty topic", func(c *config.Config) { c.OutboxNATS = []string{"=a.b"} }, "not a valid topic"},
		{"topic twice", func(c *config.Config) {
			c.OutboxWebhooks = []string{"orders=https://hooks.example.com/x"}
			c.OutboxNATS = []string{"orders"}
		}, `"orders" already has a publisher`},
		{"nats bad subject", func(c *config.Config) { c.OutboxNATS = []string{"orders=a.*"} }, `"a.*" is not a valid NATS subject`},
		{"nats bad prefix", func(c *config.Config) { c.OutboxNATSPrefix = "a b" }, "outbox-nats-prefix"},
		{"nats without url", func(c *config.Config) {
			c.OutboxNATS = []string{"orders"}
			c.NATSURL = ""
		}, "nats-url"},
		{"nats timeout", func(c *config.Config) { c.NATSTimeout = 0 }, "nats-timeout"},
		{"webhook signature unknown", func(c *config.Config) { c.OutboxWebhookSignature = "hmac" }, `outbox-webhook-signature "hmac" must be workq or standard`},
		{"standard signature with a plain secret", func(c *config.Config) {
			c.OutboxWebhooks = []string{"orders=https://hooks.example.com/x"}
			c.OutboxWebhookSignature = config.WebhookSignatureStandard
		}, `outbox-webhook-secret with --outbox-webhook-signature standard must be whsec_`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base()
			c.edit(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Fatalf("Validate = %v, want an error mentioning %q", err, c.errHas)
			}
			if _, err := publishersFromConfig(cfg, nil); !errors.Is(err, workq.ErrInvalid) {
				t.Fatalf("publisherspublishersFromConfig = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestPublishersFromConfig builds one publisher per configured topic, connected to the
// real NATS server.
func TestPublishersFromConfig(t *testing.T) {
	cfg := config.Default()
	cfg.WebhookAllow = []string{"hooks.example.com"}
	cfg.OutboxWebhookSecret = "s"
	cfg.OutboxWebhooks = []string{"orders.created=https://hooks.example.com/orders"}
	cfg.NATSURL = natsURL
	cfg.OutboxNATS = []string{"billing.charged=billing.charged.v1", "audit"}
	cfg.OutboxNATSPrefix = "workq"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	set, err := publishersFromConfig(cfg, nil)
	if err != nil {
		t.Fatalf("publisherspublishersFromConfig (NATS must run at %s): %v", natsURL, err)
	}
	defer set.Close()
	if got, want := set.Topics(), []string{"audit", "billing.charged", "orders.created"}; !slices.Equal(got, want) {
		t.Fatalf("topics %q, want %q", got, want)
	}
	// The Standard Webhooks scheme, with two secrets (a rotation).
	std := config.Default()
	std.WebhookAllow = []string{"hooks.example.com"}
	std.OutboxWebhooks = []string{"orders.created=https://hooks.example.com/orders"}
	std.OutboxWebhookSignature = config.WebhookSignatureStandard
	std.OutboxWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_" + strings.Repeat("A", 43) + "="
	if err := std.Validate(); err != nil {
		t.Fatal(err)
	}
	if s, err := publishersFromConfig(std, nil); err != nil || len(s.Handlers) != 1 {
		t.Fatalf("standard signature: %v", err)
	}
	empty, err := publishersFromConfig(config.Default(), nil)
	if err != nil || len(empty.Handlers) != 0 {
		t.Fatalf("no publishers configured: %v, %d handlers", err, len(empty.Handlers))
	}
	empty.Close()
}

// A NATS URL that cannot be reached is named without its password.
func TestPublishersFromConfigHidesNATSPassword(t *testing.T) {
	c := config.Default()
	c.NATSURL = "nats://app:hunter2-s3cret@127.0.0.1:1"
	c.NATSTimeout = 200 * time.Millisecond
	c.OutboxNATS = []string{"orders"}
	set, err := publishersFromConfig(c, slog.New(slog.DiscardHandler))
	if err == nil {
		set.Close()
		t.Fatal("publishersFromConfig connected to a NATS that is not there")
	}
	if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "nats://app:xxxxx@127.0.0.1:1") {
		t.Fatalf("error %q: want the URL without its password", err)
	}
}

// natsURL is the NATS server with JetStream that make test runs.
const natsURL = "nats://127.0.0.1:4222"
