package publish

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/hookpost"
	"github.com/workq/workq/internal/whsec"
	"github.com/workq/workq/workqtype"
)

// The headers every webhook delivery carries besides the message's own
// (HeaderTimestamp and HeaderSignature under SignatureWorkq only).
const (
	HeaderMessageID     = "Workq-Message-Id"     // the outbox message id (a UUID): the receiver's idempotency key
	HeaderTopic         = "Workq-Topic"          // the message's topic
	HeaderTimestamp     = "Workq-Timestamp"      // unix seconds when this attempt was signed
	HeaderSignature     = "Workq-Signature"      // "sha256=" + hex HMAC-SHA256(secret, timestamp + "\n" + message id + "\n" + topic + "\n" + body)
	HeaderAttempt       = "Workq-Attempt"        // 1 on the first attempt
	HeaderCorrelationID = "Workq-Correlation-Id" // set when the message has one
	HeaderPartitionKey  = "Workq-Partition-Key"  // set when the message has one
)

// The Standard Webhooks headers (https://www.standardwebhooks.com), sent
// under SignatureStandard instead of HeaderTimestamp and HeaderSignature.
const (
	HeaderWebhookID        = "Webhook-Id"        // the outbox message id, as HeaderMessageID: the same on every retry
	HeaderWebhookTimestamp = "Webhook-Timestamp" // unix seconds when this attempt was signed
	HeaderWebhookSignature = "Webhook-Signature" // "v1," + base64 HMAC-SHA256(key, id + "." + timestamp + "." + body), one per secret, space-separated
)

// WebhookSignature is the scheme a webhook publisher signs deliveries with.
type WebhookSignature string

const (
	// SignatureWorkq signs with Workq-Timestamp and Workq-Signature, which
	// VerifyWebhook checks. The default.
	SignatureWorkq WebhookSignature = "workq"
	// SignatureStandard signs as Standard Webhooks do (webhook-id,
	// webhook-timestamp, webhook-signature), which receivers check with a
	// Standard Webhooks library in any language. Its secret is
	// "whsec_<base64 of the key>".
	SignatureStandard WebhookSignature = "standard"
)

// DefaultWebhookTimeout is the request timeout of a webhook without one.
const DefaultWebhookTimeout = 10 * time.Second

// DefaultTolerance is the signature age VerifyWebhook accepts when given
// none.
const DefaultTolerance = 5 * time.Minute

// ErrNotAllowed is wrapped by NewWebhook when the URL's host is not in
// AllowHosts.
var ErrNotAllowed = workqtype.ErrHostNotAllowed

// WebhookConfig configures a webhook publisher.
type WebhookConfig struct {
	URL string // http or https, no credentials; its host must be in AllowHosts
	// Secret is the HMAC-SHA256 key shared with the receiver; required.
	// Under SignatureStandard it is one or more "whsec_<base64>" secrets
	// (keys of 24 to 64 bytes) separated by spaces: every delivery is signed
	// with each, so a receiver that knows any one of them accepts it
	// (rotation: add the new one first, drop the old one once receivers
	// have the new one).
	Secret     string
	Signature  WebhookSignature // SignatureWorkq ("" too) or SignatureStandard
	AllowHosts []string         // hosts ("host" or "host:port") this publisher may call
	Timeout    time.Duration    // per request; 0 = DefaultWebhookTimeout
	Client     *http.Client     // optional base client (transport, TLS); it is copied, redirects are never followed
	Now        func() time.Time // clock of Workq-Timestamp; nil = time.Now
}

// Webhook delivers outbox messages by HTTP POST.
type Webhook struct {
	url     *url.URL
	allow   hookpost.AllowList
	scheme  WebhookSignature
	secret  []byte   // SignatureWorkq
	keys    [][]byte // SignatureStandard
	timeout time.Duration
	client  *http.Client
	now     func() time.Time
}

// NewWebhook checks c and returns the publisher; register its Handle
// method for a topic with workq.HandleOutbox. Errors wrap workq.ErrInvalid
// (and ErrNotAllowed for a host off the list).
func NewWebhook(c WebhookConfig) (*Webhook, error) {
	if c.Secret == "" {
		return nil, invalid("webhook %s: a signing secret is required", c.URL)
	}
	if c.Timeout < 0 {
		return nil, invalid("webhook %s: timeout must not be negative, got %s", c.URL, c.Timeout)
	}
	if len(c.AllowHosts) == 0 {
		return nil, invalid("webhook %s: AllowHosts is empty: list the hosts it may call", c.URL)
	}
	allow := hookpost.NewAllowList(c.AllowHosts)
	u, err := allow.Check(c.URL, "allowed hosts")
	if err != nil {
		return nil, fmt.Errorf("%w: webhook: %w", workqtype.ErrInvalid, err)
	}
	w := &Webhook{url: u, allow: allow, scheme: c.Signature, timeout: c.Timeout,
		client: hookpost.NoRedirects(c.Client), now: c.Now}
	switch c.Signature {
	case "", SignatureWorkq:
		w.scheme, w.secret = SignatureWorkq, []byte(c.Secret)
	case SignatureStandard:
		if w.keys, err = whsec.Parse(c.Secret); err != nil {
			return nil, invalid("webhook %s: the secret of signature %q: %v", c.URL, SignatureStandard, err)
		}
	default:
		return nil, invalid("webhook %s: unknown signature %q (want %q or %q)", c.URL, c.Signature, SignatureWorkq, SignatureStandard)
	}
	if w.timeout == 0 {
		w.timeout = DefaultWebhookTimeout
	}
	if w.now == nil {
		w.now = time.Now
	}
	return w, nil
}

// reservedHTTP reports the headers the publisher sets itself, which a
// message may not override.
func reservedHTTP(k string) bool {
	return strings.HasPrefix(k, "Workq-") || k == "X-Workq-Signature" || k == "Content-Type"
}

// reservedStandard adds the Standard Webhooks headers under
// SignatureStandard (under SignatureWorkq a message may send them, as it
// always could).
func reservedStandard(k string) bool {
	return reservedHTTP(k) || k == HeaderWebhookID || k == HeaderWebhookTimestamp || k == HeaderWebhookSignature
}

// Handle POSTs the message's payload to the URL. 2xx acks; 429 and 503
// throttle (workq.Throttle with the answer's Retry-After, seconds or an
// HTTP-date; 1 s when it has none, at most 5 minutes): the message waits
// without using an attempt and the outbox queue slows down on every
// process; other 5xx, 408, timeouts and network errors retry; any other
// answer (a redirect included: none is followed) fails the message for
// good, and so does a message whose headers HTTP cannot carry.
func (w *Webhook) Handle(ctx context.Context, job *workq.Message[json.RawMessage]) error {
	// Checked again per request: the URL is fixed, but this keeps the rule
	// in one place should it ever come from elsewhere.
	u, err := w.allow.Check(w.url.String(), "allowed hosts")
	if err != nil {
		return workq.Permanent(fmt.Errorf("webhook: %w", err))
	}
	src, err := messageHeaders(job.Headers)
	if err != nil {
		return workq.Permanent(fmt.Errorf("webhook: %w", err))
	}
	header := http.Header{}
	reserved := reservedHTTP
	if w.scheme == SignatureStandard {
		reserved = reservedStandard
	}
	dropped, err := hookpost.SetHeaders(header, src, reserved)
	if err != nil {
		return workq.Permanent(fmt.Errorf("webhook: %w", err))
	}
	if len(dropped) > 0 {
		job.Logger().Warn("webhook: message headers not sent (reserved or hop-by-hop)", "headers", dropped)
	}
	body := []byte(job.Payload)
	if len(body) == 0 {
		body = []byte("{}")
	}
	ts := strconv.FormatInt(w.now().Unix(), 10)
	header.Set("Content-Type", "application/json")
	header.Set(HeaderMessageID, job.MessageID)
	header.Set(HeaderTopic, job.Topic)
	header.Set(HeaderAttempt, strconv.Itoa(job.Attempt))
	if w.scheme == SignatureStandard {
		id := textproto.TrimString(job.MessageID) // as received (see signed)
		header.Set(HeaderWebhookID, id)
		header.Set(HeaderWebhookTimestamp, ts)
		header.Set(HeaderWebhookSignature, standardSignature(w.keys, id, ts, body))
	} else {
		header.Set(HeaderTimestamp, ts)
		header.Set(HeaderSignature, hookpost.Sign(w.secret, signed(ts, job.MessageID, job.Topic, body)...))
	}
	if job.CorrelationID != "" {
		header.Set(HeaderCorrelationID, job.CorrelationID)
	}
	if job.PartitionKey != "" {
		header.Set(HeaderPartitionKey, job.PartitionKey)
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	resp, err := hookpost.Post(ctx, w.client, u, header, body)
	if resp != nil {
		job.Logger().Debug("webhook answered", "url", u.Redacted(), "status", resp.Status)
	}
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// signed lists what a signature covers: the timestamp, the message id and
// the topic, newline-separated (none of them can hold a newline: the id is
// a UUID, topics have no control characters), then the body. Covering the
// id and topic keeps a captured request from being replayed, within the
// tolerance, under another message id (past a receiver's de-duplication)
// or another topic.
func signed(ts, messageID, topic string, body []byte) [][]byte {
	// As sent and as received: HTTP trims header values (a topic written by
	// SQL could have spaces at its ends; the clients refuse them).
	messageID, topic = textproto.TrimString(messageID), textproto.TrimString(topic)
	return [][]byte{[]byte(ts), {'\n'}, []byte(messageID), {'\n'}, []byte(topic), {'\n'}, body}
}

// standardSignature is the Standard Webhooks signature header: for each key,
// "v1," and the base64 of HMAC-SHA256(key, id "." timestamp "." body),
// space-separated. The id is the outbox message id, a UUID, and the
// timestamp decimal digits: neither holds a dot, which the specification
// requires of both (the body could otherwise be shifted into them).
func standardSignature(keys [][]byte, id, ts string, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write([]byte(ts))
		m.Write([]byte{'.'})
		m.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return strings.Join(sigs, " ")
}

// ErrBadSignature is wrapped by VerifyWebhook when the signature is missing
// or does not match the body.
var ErrBadSignature = errors.New("webhook signature does not verify")

// ErrStaleTimestamp is wrapped by VerifyWebhook when the signed timestamp is
// further from now than the tolerance (a replayed or delayed delivery).
var ErrStaleTimestamp = errors.New("webhook timestamp outside the tolerance")

// VerifyWebhook is for receivers: it checks that header's Workq-Signature is
// the HMAC-SHA256 under secret of its Workq-Timestamp, Workq-Message-Id and
// Workq-Topic (each followed by a newline) and the body, and
// that the timestamp is within tolerance of now (either side; tolerance <= 0
// means DefaultTolerance). Verify the raw body bytes, before any parsing.
// A valid signature proves the sender knows the secret; the timestamp bounds
// how long a captured request can be replayed; Workq-Message-Id lets the
// receiver drop a retry it already processed.
func VerifyWebhook(secret string, header http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if secret == "" {
		return fmt.Errorf("%w: empty secret", ErrBadSignature)
	}
	ts := header.Get(HeaderTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not unix seconds", ErrBadSignature, HeaderTimestamp, ts)
	}
	sig := header.Get(HeaderSignature)
	if sig == "" {
		return fmt.Errorf("%w: no %s header", ErrBadSignature, HeaderSignature)
	}
	want := hookpost.Sign([]byte(secret), signed(ts, header.Get(HeaderMessageID), header.Get(HeaderTopic), body)...)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return ErrBadSignature
	}
	if age := now.Sub(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed at %s, %s from now (tolerance %s)", ErrStaleTimestamp,
			time.Unix(sec, 0).UTC().Format(time.RFC3339), age.Round(time.Second), tolerance)
	}
	return nil
}
