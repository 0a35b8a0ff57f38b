// Package builtin holds the handlers `workq worker` runs out of the box:
// webhook (POST a JSON body to an allow-listed host) and exec (run an
// allow-listed command).
package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/workq/workq/internal/hookpost"
	"github.com/workq/workq/internal/worker"
)

// WebhookKind is the job kind of the webhook handler.
const WebhookKind = "webhook"

// WebhookPayload is the payload of a webhook job.
type WebhookPayload struct {
	URL     string            `json:"url"`
	Body    json.RawMessage   `json:"body"`
	Headers map[string]string `json:"headers"`
}

// SignatureHeader carries "sha256=<hex HMAC-SHA256 of the body>" when a
// secret is configured.
const SignatureHeader = "X-Workq-Signature"

// Webhook POSTs job bodies to allow-listed hosts. The HTTP side (allow-list,
// no redirects, header sanitising, signing, status classification) is
// internal/hookpost, shared with the outbox webhook publisher (package
// publish), which signs timestamp.body instead of the body alone.
type Webhook struct {
	allow  hookpost.AllowList
	secret []byte
	client *http.Client
}

// NewWebhook returns the webhook handler. allow lists the hosts (host or
// host:port) it may call; every other URL fails the job permanently, so a
// payload cannot aim the worker at internal addresses. Redirects are never
// followed: a 3xx answer fails the job.
func NewWebhook(allow []string, secret string, timeout time.Duration) *Webhook {
	return &Webhook{allow: hookpost.NewAllowList(allow), secret: []byte(secret),
		client: hookpost.NoRedirects(&http.Client{Timeout: timeout})}
}

// Handle is the worker.HandlerFunc: 2xx acks; 429 and 503 throttle (the
// job's limit key, else its queue, for the answer's Retry-After:
// hookpost.RetryAfter), without using an attempt; other 5xx, 408 and
// network errors retry; any other status (3xx included) fails permanently. Payload
// headers are copied except the ones that belong to the transport (Host,
// Content-Length, hop-by-hop) and the ones this handler sets itself; a
// header name or value that HTTP cannot carry fails the job permanently.
func (h *Webhook) Handle(ctx context.Context, job *worker.Job) error {
	var p WebhookPayload
	if err := job.Decode(&p); err != nil {
		return err
	}
	u, err := h.allow.Check(p.URL, "--webhook-allow")
	if err != nil {
		return worker.Permanent(fmt.Errorf("webhook: %w", err))
	}
	body := []byte(p.Body)
	if len(body) == 0 {
		body = []byte("null")
	}
	src := make(map[string][]string, len(p.Headers))
	for k, v := range p.Headers {
		src[k] = []string{v}
	}
	header := http.Header{}
	// The payload must not be able to forge the signature: without a secret
	// the header is removed, not passed through.
	if _, err := hookpost.SetHeaders(header, src, func(k string) bool { return k == http.CanonicalHeaderKey(SignatureHeader) }); err != nil {
		return worker.Permanent(fmt.Errorf("webhook: %w", err))
	}
	header.Set("Content-Type", "application/json")
	header.Set("Idempotency-Key", IdempotencyKey(job))
	header.Set("X-Workq-Attempt", strconv.Itoa(int(job.Attempt)))
	if len(h.secret) > 0 {
		header.Set(SignatureHeader, Sign(h.secret, body))
	}
	resp, err := hookpost.Post(ctx, h.client, u, header, body)
	if resp != nil {
		job.Logger().Info("webhook answered", "url", u.Redacted(), "status", resp.Status)
	}
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// IdempotencyKey is the Idempotency-Key the webhook handler sends for job:
// <table>-<id>-<created_at in Unix microseconds>, e.g.
// job_runs-42-1764316800123456. It is the same on every attempt of the
// item, so a receiver can drop a delivery it already processed. The
// creation time is there because the id alone can be handed out twice:
// after a failover to a standby that had not received the last commits
// (asynchronous replication), the new primary's identity sequence gives
// the lost items' ids to new, different items (design §26); their
// creation times differ.
func IdempotencyKey(job *worker.Job) string {
	return fmt.Sprintf("%s-%d-%d", job.Table, job.ID, job.CreatedAt.UnixMicro())
}

// Sign returns the signature header value of body under secret.
func Sign(secret, body []byte) string { return hookpost.Sign(secret, body) }
