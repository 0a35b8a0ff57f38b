package inboxrt_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// FuzzReceive: inbox Validate and Receive agree (see
// testutil.CheckValidateAgrees). `make fuzz` runs it.
func FuzzReceive(f *testing.F) {
	f.Add("psp", "m-1", "payment.settled", `{"a":1}`, "default", int16(0), 0)
	f.Add("s'; drop table inbox; --", "m", "", `{}`, "", int16(0), 0)
	f.Add("s\x00", "m", "", `{}`, "", int16(0), 0)
	f.Add("s", "\xff", "", `{}`, "", int16(0), 0)
	f.Add("\xff", "m", "", `{}`, "", int16(0), 0)
	f.Add("s", "m", "t\x01", `{}`, "", int16(0), 0)
	f.Add("s", "m", "", `[1]`, "", int16(0), 0)
	f.Add("s", "m", "", `{}`, "bad queue", int16(-1), -3)
	f.Add("", "", "", `{"s":"\u0000"}`, "", int16(0), 0)
	pool := testdb.Pool(f)
	client := inboxrt.NewClient(inboxrt.ClientOptions{})
	f.Fuzz(func(t *testing.T, source, messageID, topic, payload, queue string, priority int16, maxAttempts int) {
		m := inbox.Message{Source: source, MessageID: messageID, Topic: topic, Payload: json.RawMessage(payload),
			Queue: queue, Priority: priority, MaxAttempts: maxAttempts}
		testutil.CheckValidateAgrees(t, pool, "inbox", m, client.Validate(m), func() (int64, error) {
			r, err := client.Receive(context.Background(), pool, m)
			return r.ID, err
		})
	})
}
