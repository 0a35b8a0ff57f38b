// Package builtin holds the handlers `workq worker` runs out of the box:
// webhook (POST a JSON body to an allow-listed host) and exec (run an
// allow-listed command).
package builtin

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/workq/workq/worker"
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

// Webhook POSTs job bodies to allow-listed hosts.
type Webhook struct {
	allow  map[string]bool // host or host:port, lower case
	secret []byte
	client *http.Client
}

// NewWebhook returns the webhook handler. allow lists the hosts (host or
// host:port) it may call; every other URL fails the job permanently, so a
// payload cannot aim the worker at internal addresses.
func NewWebhook(allow []string, secret string, timeout time.Duration) *Webhook {
	m := map[string]bool{}
	for _, h := range allow {
		m[strings.ToLower(h)] = true
	}
	return &Webhook{allow: m, secret: []byte(secret), client: &http.Client{
		Timeout: timeout,
		// A redirect could lead off the allow-list: never follow one.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Handle is the worker.HandlerFunc: 2xx acks, 5xx, 429 and network errors
// retry, any other status fails permanently.
func (h *Webhook) Handle(ctx context.Context, job *worker.Job) error {
	var p WebhookPayload
	if err := job.Decode(&p); err != nil {
		return err
	}
	u, err := h.check(p.URL)
	if err != nil {
		return worker.Permanent(err)
	}
	body := []byte(p.Body)
	if len(body) == 0 {
		body = []byte("null")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return worker.Permanent(fmt.Errorf("webhook: build request: %w", err))
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", job.Table, job.ID))
	req.Header.Set("X-Workq-Attempt", strconv.Itoa(int(job.Attempt)))
	// The payload must not be able to forge a signature: without a secret
	// the header is removed, not passed through.
	req.Header.Del(SignatureHeader)
	if len(h.secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(h.secret, body))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: POST %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	job.Logger().Info("webhook answered", "url", u.Redacted(), "status", resp.StatusCode)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("webhook: POST %s: %s: %s", u.Redacted(), resp.Status, snippet)
	default:
		return worker.Permanent(fmt.Errorf("webhook: POST %s: %s (not retried): %s", u.Redacted(), resp.Status, snippet))
	}
}

func (h *Webhook) check(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return nil, fmt.Errorf("webhook: url %q is not a valid URL", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("webhook: url %q must be http or https", raw)
	}
	if u.User != nil {
		return nil, errors.New("webhook: credentials in the URL are not allowed")
	}
	host := strings.ToLower(u.Hostname())
	hostport := host
	if u.Port() != "" {
		hostport = net.JoinHostPort(host, u.Port())
	}
	if !h.allow[host] && !h.allow[hostport] {
		return nil, fmt.Errorf("webhook: host %q is not in this worker's --webhook-allow list", hostport)
	}
	return u, nil
}

// Sign returns the signature header value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
