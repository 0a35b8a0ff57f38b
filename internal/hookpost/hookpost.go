// Package hookpost is the HTTP side that workq's two webhook senders share:
// the job handler in worker/builtin (URL in the payload) and the outbox
// publisher in package publish (URL per topic). It holds the host
// allow-list, the client that never follows redirects, header sanitising,
// HMAC-SHA256 signing and the POST with its result classification (2xx ack;
// 429 and 503 throttle; other 5xx, 408 and network errors retry; anything
// else fails for good).
package hookpost

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// ErrNotAllowed is wrapped by Check when a URL's host is not on the list.
var ErrNotAllowed = workqtype.ErrHostNotAllowed

// ErrBadURL is wrapped by Check when a URL is not an http(s) URL without
// credentials.
var ErrBadURL = errors.New("not a valid URL")

// AllowList is a set of hosts ("host" or "host:port", lower case) that may be
// called. A bare host allows every port of it; host:port only that port.
type AllowList map[string]bool

// NewAllowList returns the list of hosts.
func NewAllowList(hosts []string) AllowList {
	a := AllowList{}
	for _, h := range hosts {
		a[strings.ToLower(strings.TrimSpace(h))] = true
	}
	return a
}

// Check parses raw and returns it when it is an http(s) URL without
// credentials whose host is on the list. flag names the setting to extend in
// the error message (for example "--webhook-allow").
func (a AllowList) Check(raw, flag string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return nil, fmt.Errorf("url %q: %w", raw, ErrBadURL)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("url %q must be http or https: %w", raw, ErrBadURL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("credentials in the URL are not allowed: %w", ErrBadURL)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("url %q has no host: %w", raw, ErrBadURL)
	}
	host := strings.ToLower(u.Hostname())
	hostport := host
	if u.Port() != "" {
		hostport = net.JoinHostPort(host, u.Port())
	}
	if !a[host] && !a[hostport] {
		return nil, fmt.Errorf("host %q is not in this worker's %s list: %w", hostport, flag, ErrNotAllowed)
	}
	return u, nil
}

// NoRedirects returns a copy of base (a fresh client when nil) that never
// follows a redirect: a redirect could lead off the allow-list, and a
// followed 301/302/303 would turn the POST into a GET. The redirect response
// itself is the result (it fails the delivery for good).
func NoRedirects(base *http.Client) *http.Client {
	c := &http.Client{}
	if base != nil {
		*c = *base
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// hopByHop are the headers a message may not set: they belong to the
// connection or the request framing, not to the message.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true, "Expect": true,
}

// SetHeaders copies src into dst. Headers that belong to the transport (hop
// by hop, Host, Content-Length, Expect) and those reserved(name) claims are
// dropped and returned, so the caller can log them; a name that is not an
// HTTP token or a value with control characters is an error (the message is
// malformed: retrying cannot help).
func SetHeaders(dst http.Header, src map[string][]string, reserved func(canonical string) bool) (dropped []string, err error) {
	for k, vs := range src {
		if !validName(k) {
			return nil, fmt.Errorf("header name %q is not a valid HTTP header name", k)
		}
		ck := http.CanonicalHeaderKey(k)
		if hopByHop[ck] || (reserved != nil && reserved(ck)) {
			dropped = append(dropped, ck)
			continue
		}
		for _, v := range vs {
			if !validValue(v) {
				return nil, fmt.Errorf("header %s: value %q has control characters", ck, v)
			}
			dst.Add(ck, v)
		}
	}
	return dropped, nil
}

// validName reports whether s is an RFC 9110 token.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validValue reports whether s is a header value without control characters
// other than tab.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// Sign returns "sha256=<hex HMAC-SHA256 of the concatenated parts>" under
// secret.
func Sign(secret []byte, parts ...[]byte) string {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write(p)
	}
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Response is what the receiver answered to a delivery that got an answer.
type Response struct {
	Status  int
	Snippet string // the first 512 bytes of the body
}

// Post sends body to u with header and classifies the outcome as a worker
// handler result: nil for 2xx; worker.Throttle for 429 and 503 (the
// receiver is overloaded: the item waits its Retry-After, see RetryAfter,
// without using an attempt, and its limit key or queue slows down); a plain
// (retried) error for network errors, timeouts, other 5xx and 408;
// worker.Permanent for any other status (including a redirect, which is
// never followed). The response is nil when no answer arrived.
func Post(ctx context.Context, client *http.Client, u *url.URL, header http.Header, body []byte) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, worker.Permanent(fmt.Errorf("build request: %w", err))
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	// Drain a little more so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	r := &Response{Status: resp.StatusCode, Snippet: string(snippet)}
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return r, nil
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		d := RetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return r, worker.Throttle(d, fmt.Errorf("POST %s: %s (Retry-After %q): %s", u.Redacted(), resp.Status, resp.Header.Get("Retry-After"), snippet))
	case code >= 500 || code == http.StatusRequestTimeout:
		return r, fmt.Errorf("POST %s: %s: %s", u.Redacted(), resp.Status, snippet)
	case code >= 300 && code < 400:
		return r, worker.Permanent(fmt.Errorf("POST %s: %s to %q (redirects are not followed): %s",
			u.Redacted(), resp.Status, resp.Header.Get("Location"), snippet))
	default:
		return r, worker.Permanent(fmt.Errorf("POST %s: %s (not retried): %s", u.Redacted(), resp.Status, snippet))
	}
}

// DefaultRetryAfter is how long a 429 or 503 without a usable Retry-After
// holds its scope back; MaxRetryAfter caps any Retry-After (a receiver's
// answer must not park a queue for hours).
const (
	DefaultRetryAfter = time.Second
	MaxRetryAfter     = 5 * time.Minute
)

// RetryAfter reads a Retry-After header value as of now: delay-seconds (a
// non-negative integer) or an HTTP-date (a date in the past is 0). A
// missing or malformed value is DefaultRetryAfter; any value is capped at
// MaxRetryAfter.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return DefaultRetryAfter
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return DefaultRetryAfter
		}
		if n >= int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return DefaultRetryAfter
	}
	return min(max(at.Sub(now), 0), MaxRetryAfter)
}
