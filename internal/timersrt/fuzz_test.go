package timersrt_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/workq/workq/internal/timersrt"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/timers"
)

// FuzzSchedule: timers Validate and Schedule agree (see
// testutil.CheckValidateAgrees), including due times far from now. `make
// fuzz` runs it.
func FuzzSchedule(f *testing.F) {
	f.Add("default", "reminder", `{"a":1}`, int64(1000), int64(0), int16(0), 0)
	f.Add("q'; drop table timers; --", "t", `{}`, int64(1), int64(0), int16(0), 0)
	f.Add("q", "t\x00", `{}`, int64(1), int64(0), int16(0), 0)
	f.Add("q", "t", `[1]`, int64(1), int64(0), int16(0), 0)
	f.Add("q", "t", `{}`, int64(0), int64(0), int16(0), 0)
	f.Add("q", "t", `{}`, int64(-1), int64(0), int16(0), 0)
	f.Add("q", "t", `{}`, int64(0), int64(1700000000000), int16(0), 0)
	f.Add("q", "t", `{}`, int64(0), int64(-62135596800001), int16(0), 0)
	f.Add("q", "t", `{}`, int64(0), int64(9223372036854), int16(0), 0)
	f.Add("q", "t", `{}`, int64(5), int64(1700000000000), int16(0), -1)
	pool := testdb.Pool(f)
	client := timersrt.NewClient(timersrt.ClientOptions{})
	f.Fuzz(func(t *testing.T, queue, topic, payload string, delayMs, dueUnixMs int64, priority int16, maxAttempts int) {
		tm := timers.Timer{Queue: queue, Topic: topic, Payload: json.RawMessage(payload),
			Delay: time.Duration(delayMs) * time.Millisecond, Priority: priority, MaxAttempts: maxAttempts}
		if dueUnixMs != 0 {
			tm.DueTime = time.UnixMilli(dueUnixMs)
		}
		testutil.CheckValidateAgrees(t, pool, "timers", tm, client.Validate(tm), func() (int64, error) {
			s, err := client.Schedule(context.Background(), pool, tm)
			return s.ID, err
		})
	})
}
