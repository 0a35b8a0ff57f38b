package workq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// TimerNotifyWithin: a timer due within it wakes the workers with a
// NOTIFY, one due later does not; its default is the Client's
// FetchPollInterval (1s), and beyond a day it is refused naming the field.
func TestConfigTimerNotifyWithin(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	for _, bad := range []time.Duration{25 * time.Hour, 1 << 62} {
		_, err := workq.NewClient(pool, workq.Config{TimerNotifyWithin: bad})
		var ve *workq.ValidationError
		if !errors.Is(err, workq.ErrInvalid) || !errors.As(err, &ve) || ve.Field != "TimerNotifyWithin" {
			t.Errorf("TimerNotifyWithin %s: %v, want ErrInvalid naming TimerNotifyWithin", bad, err)
		}
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "listen "+workqtype.NotifyChannel("", "timers")); err != nil {
		t.Fatal(err)
	}
	notified := func() bool {
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := conn.Conn().WaitForNotification(wctx)
		return err == nil
	}
	for i, c := range []struct {
		cfg   workq.Config
		delay time.Duration
		want  bool
	}{
		{workq.Config{}, 500 * time.Millisecond, true},                                            // default 1s
		{workq.Config{}, 5 * time.Second, false},                                                  // beyond the default
		{workq.Config{TimerNotifyWithin: 10 * time.Second}, 5 * time.Second, true},                // set
		{workq.Config{FetchPollInterval: 10 * time.Second}, 5 * time.Second, true},                // the poll's
		{workq.Config{TimerNotifyWithin: -1, FetchPollInterval: time.Minute}, time.Second, false}, // only due now
	} {
		c.cfg.Maintenance.Disabled = true
		client, err := workq.NewClient(pool, c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.ScheduleTimer(ctx, timers.Timer{Queue: "notify", Topic: "t", Delay: c.delay, Payload: map[string]int{}}); err != nil {
			t.Fatal(err)
		}
		if got := notified(); got != c.want {
			t.Errorf("case %d (%+v, due in %s): notified %v, want %v", i, c.cfg, c.delay, got, c.want)
		}
	}
}
