package pgembed

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Stop waits for the cluster's watchdog to exit and be reaped: no
// goroutine of the Server's outlives it (a goroutine-leak check right
// after Stop, as the soak test makes, must not find it).
func TestStopLeavesNoWatchdogWaiter(t *testing.T) {
	s, err := Start(context.Background())
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// The waiter returns right after it reports the watchdog reaped: a
	// moment's grace for that return, far less than the watchdog's own
	// half-second poll.
	deadline := time.Now().Add(100 * time.Millisecond)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "pgembed.(*Server).watch") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a watchdog waiter outlived Stop:\n%s", stacks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
