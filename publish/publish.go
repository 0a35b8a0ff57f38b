// Package publish holds workq's built-in outbox publishers: a webhook
// (NewWebhook) and a NATS JetStream stream (NewJetStream). Each one's
// Handle method is an outbox handler: register it for a topic with
// workq.HandleOutbox, and a claimed outbox message is delivered and acked,
// retried or failed by the same runtime that runs every other kind of
// work.
//
//	hook, err := publish.NewWebhook(publish.WebhookConfig{URL: "https://hooks.example.com/orders", Secret: secret, AllowHosts: []string{"hooks.example.com"}})
//	err = workq.HandleOutbox(workers, "order.created", hook.Handle)
//
// A receiver checks a webhook's signature with VerifyWebhook. Configuration
// errors wrap workq.ErrInvalid. docs/publishers.md has the details.
package publish

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/workq/workq/workqtype"
)

// invalid is an error about a bad publisher configuration: it wraps
// workqtype.ErrInvalid (workq.ErrInvalid).
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", workqtype.ErrInvalid, fmt.Sprintf(format, args...))
}

// messageHeaders decodes an outbox message's headers (a JSON object) into
// header values: a string is the value; an array gives one value per
// element; null is no header; a number, boolean or object is its JSON text.
func messageHeaders(raw json.RawMessage) (map[string][]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("message headers are not a JSON object: %w", err)
	}
	out := make(map[string][]string, len(obj))
	for k, v := range obj {
		vals, err := headerValues(v)
		if err != nil {
			return nil, fmt.Errorf("message header %q: %w", k, err)
		}
		if len(vals) > 0 {
			out[k] = vals
		}
	}
	return out, nil
}

func headerValues(v json.RawMessage) ([]string, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return nil, err
	}
	switch t := x.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{t}, nil
	case []any:
		var out []string
		for _, e := range t {
			switch s := e.(type) {
			case nil:
			case string:
				out = append(out, s)
			default:
				b, _ := json.Marshal(s)
				out = append(out, string(b))
			}
		}
		return out, nil
	case bool:
		return []string{strconv.FormatBool(t)}, nil
	default:
		return []string{string(compact(v))}, nil
	}
}

func compact(v json.RawMessage) []byte {
	var m any
	if json.Unmarshal(v, &m) != nil {
		return v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return v
	}
	return b
}
