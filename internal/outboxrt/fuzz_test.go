package outboxrt_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/outbox"
)

// FuzzSend: outbox Validate and Send agree (see testutil.CheckValidateAgrees)
// over every string field, the payload and the numbers. `make fuzz` runs it.
func FuzzSend(f *testing.F) {
	f.Add("default", "order.created", `{"id":1}`, "X-Trace", "abc", "corr-1", "order-1", int16(0), 0, int64(0))
	f.Add("q'; drop table outbox; --", "t", `{}`, "", "", "", "", int16(0), 0, int64(0))
	f.Add("q", "t\x00", `{}`, "", "", "", "", int16(0), 0, int64(0))
	f.Add("q", "t", `[1]`, "", "", "", "", int16(0), 0, int64(0))
	f.Add("q", "t", `{}`, "Bad Header", "v", "", "", int16(0), 0, int64(0))
	f.Add("q", "t", `{}`, "H", "\xff", "", "", int16(0), 0, int64(0))
	f.Add("q", "t", `{}`, "", "", "\xff", "", int16(0), 0, int64(0))
	f.Add("q", "t", `{}`, "", "", "", "\xff", int16(0), 0, int64(0))
	f.Add("q", "t", `{}`, "", "", "c\x00", "k\x00", int16(-1), -1, int64(-5))
	f.Add("q", "t", `{"s":"\u0000"}`, "", "", "", "", int16(0), 1001, int64(0))
	// The shared server: this checks what Send stores, never a delivery, and
	// each fuzz worker process would otherwise start this package's own
	// cluster before fuzzing anything.
	pool := testdb.SharedPool(f)
	client := outboxrt.NewClient(outboxrt.ClientOptions{})
	f.Fuzz(func(t *testing.T, queue, topic, payload, hname, hvalue, corr, key string, priority int16, maxAttempts int, delayMs int64) {
		m := outbox.Message{Queue: queue, Topic: topic, Payload: json.RawMessage(payload), CorrelationID: corr,
			PartitionKey: key, Priority: priority, MaxAttempts: maxAttempts, Delay: time.Duration(delayMs) * time.Millisecond}
		if hname != "" || hvalue != "" {
			m.Headers = map[string]string{hname: hvalue}
		}
		testutil.CheckValidateAgrees(t, pool, "outbox", m, client.Validate(m), func() (int64, error) {
			s, err := client.Send(context.Background(), pool, m)
			return s.ID, err
		})
	})
}
