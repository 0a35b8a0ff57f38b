package publish_test

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/publish"
)

// standardReceiver checks a delivery as the Standard Webhooks specification
// (https://www.standardwebhooks.com, spec/standard-webhooks.md 1.0.0) tells
// a consumer to, written from the specification alone and sharing nothing
// with package publish: the key is the base64 after "whsec_"; the signed
// content is webhook-id "." webhook-timestamp "." raw body; HMAC-SHA256;
// webhook-signature is a space-delimited list of "version,base64"
// signatures, any "v1" one of which may match (compared in constant time);
// the timestamp (unix seconds) must be within the tolerance of now.
type standardReceiver struct{ key []byte }

func newStandardReceiver(t *testing.T, secret string) standardReceiver {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("receiver secret: %v", err)
	}
	return standardReceiver{key: key}
}

func (v standardReceiver) verify(h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not an integer", ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp %s from now", d)
	}
	mac := hmac.New(sha256.New, v.key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Split(sigs, " ") {
		version, b64, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no v1 signature matches")
}

// newSecret returns a random "whsec_" secret with an n-byte key.
func newSecret(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// TestWebhookStandardSignature relays messages through the real runtime and
// database to a real HTTP server that verifies each delivery with
// standardReceiver and answers 401 to one that does not verify. A publisher
// signing with the current and the previous secret (a rotation) is accepted
// by receivers knowing either one; webhook-id is the message id on every
// retry; the workq scheme's headers are absent and a message cannot forge
// the standard ones. A publisher whose secret the receiver does not know is
// refused, and its message fails.
func TestWebhookStandardSignature(t *testing.T) {
	current, previous, unknown := newSecret(t, 32), newSecret(t, 24), newSecret(t, 64)
	knowsCurrent, knowsPrevious := newStandardReceiver(t, current), newStandardReceiver(t, previous)
	knowsNeither := newStandardReceiver(t, unknown)
	target := newRecorder(t)
	verified := func(next func(http.ResponseWriter, *http.Request, int)) func(http.ResponseWriter, *http.Request, int) {
		return func(w http.ResponseWriter, r *http.Request, n int) {
			body := target.requests(r.URL.Path)[n-1].Body
			if err := knowsCurrent.verify(r.Header, body, time.Now()); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			next(w, r, n)
		}
	}
	target.on("/rotating", verified(statuses(500, 200))) // verified both times; retried once
	target.on("/stranger", verified(statuses(200)))

	pool := testdb.PoolWith(t, 8)
	handlers := map[string]publisher{}
	for topic, c := range map[string]struct{ path, secret string }{
		"std.rotating": {"/rotating", current + " " + previous},
		"std.stranger": {"/stranger", unknown},
	} {
		wh, err := publish.NewWebhook(publish.WebhookConfig{URL: target.srv.URL + c.path, Secret: c.secret,
			Signature: publish.SignatureStandard, AllowHosts: []string{target.host()}})
		if err != nil {
			t.Fatal(err)
		}
		handlers[topic] = wh.Handle
	}
	startRelay(t, pool, relayConfig(), handlers, worker.Options{})
	ids := enqueue(t, pool,
		message{Topic: "std.rotating", Payload: map[string]any{"order": 42, "note": "a.b.c"}, CorrelationID: "corr-9",
			Headers: map[string]any{"X-Tenant": "acme", "Webhook-Signature": "v1,forged", "Webhook-Id": "forged", "Webhook-Timestamp": "1"}},
		message{Topic: "std.stranger", Payload: map[string]any{"n": 1}})

	t.Run("rotation and retries", func(t *testing.T) {
		row := waitFinal(t, pool, ids[0].ID)
		if row.Status != lease.StatusDone || row.Attempts != 2 {
			t.Fatalf("ended %s after %d attempts (last error %q), want done after 2", row.Status, row.Attempts, row.LastError)
		}
		reqs := target.requests("/rotating")
		if len(reqs) != 2 {
			t.Fatalf("server received %d requests, want 2", len(reqs))
		}
		for i, r := range reqs {
			if string(r.Body) != row.Payload {
				t.Errorf("request %d: body %q, want the stored payload %q", i+1, r.Body, row.Payload)
			}
			for name, v := range map[string]standardReceiver{"current": knowsCurrent, "previous": knowsPrevious} {
				if err := v.verify(r.Header, r.Body, time.Now()); err != nil {
					t.Errorf("request %d: a receiver with the %s secret: %v", i+1, name, err)
				}
			}
			if err := knowsNeither.verify(r.Header, r.Body, time.Now()); err == nil {
				t.Errorf("request %d: a receiver with another secret accepted it", i+1)
			}
			if err := knowsCurrent.verify(r.Header, append([]byte(" "), r.Body...), time.Now()); err == nil {
				t.Errorf("request %d: accepted with a changed body", i+1)
			}
			if got := r.Header.Get("webhook-id"); got != ids[0].MessageID {
				t.Errorf("request %d: webhook-id %q, want the message id %q on every attempt", i+1, got, ids[0].MessageID)
			}
			if got := strings.Fields(r.Header.Get("webhook-signature")); len(got) != 2 {
				t.Errorf("request %d: webhook-signature %q, want one signature per secret", i+1, got)
			}
			ts, err := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
			if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
				t.Errorf("request %d: webhook-timestamp %q is not the current unix time", i+1, r.Header.Get("webhook-timestamp"))
			}
			for k, want := range map[string]string{
				publish.HeaderTimestamp: "", publish.HeaderSignature: "", // the workq scheme's
				publish.HeaderTopic: "std.rotating", publish.HeaderAttempt: strconv.Itoa(i + 1),
				publish.HeaderCorrelationID: "corr-9", "X-Tenant": "acme", "Content-Type": "application/json",
			} {
				if got := r.Header.Get(k); got != want {
					t.Errorf("request %d: header %s = %q, want %q", i+1, k, got, want)
				}
			}
		}
	})
	t.Run("unknown secret", func(t *testing.T) {
		row := waitFinal(t, pool, ids[1].ID)
		if row.Status != lease.StatusFailed || row.Attempts != 1 || !strings.Contains(row.LastError, "401") {
			t.Fatalf("ended %s after %d attempts (last error %q), want failed at once by the receiver's 401", row.Status, row.Attempts, row.LastError)
		}
	})
}
