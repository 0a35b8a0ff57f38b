package startstop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// loop is the smallest service: a goroutine that waits for its stop, then
// for release (a slow stop) before it returns.
type loop struct {
	Lifecycle
	release  chan struct{}
	failNext bool
	cause    error
}

func newLoop() *loop { return &loop{release: make(chan struct{})} }

func (s *loop) Start(ctx context.Context) error {
	run, err := s.Begin(ctx)
	if err != nil {
		return err
	}
	if s.failNext {
		s.failNext = false
		run.Abort()
		return errors.New("start failed")
	}
	go func() {
		defer run.Stopped()
		run.Started()
		<-run.Context().Done()
		s.cause = context.Cause(run.Context())
		<-s.release
	}()
	return nil
}

var _ Service = (*loop)(nil)

// wait fails t unless ch is closed within a generous deadline.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not closed", what)
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestLifecycle(t *testing.T) {
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	tests := []struct {
		name string
		run  func(t *testing.T, s *loop)
	}{
		{"stop before start is ErrNotStarted", func(t *testing.T, s *loop) {
			if err := s.Stop(bg); !errors.Is(err, ErrNotStarted) {
				t.Fatalf("Stop: %v, want ErrNotStarted", err)
			}
			if _, err := s.RequestStop(); !errors.Is(err, ErrNotStarted) {
				t.Fatalf("RequestStop: %v, want ErrNotStarted", err)
			}
		}},
		{"start with an ended ctx fails and leaves it startable", func(t *testing.T, s *loop) {
			if err := s.Start(cancelled); !errors.Is(err, context.Canceled) {
				t.Fatalf("Start: %v, want context.Canceled", err)
			}
			if s.Began() {
				t.Fatal("Began after a refused Start")
			}
			close(s.release)
			if err := s.Start(bg); err != nil {
				t.Fatal(err)
			}
			if err := s.Stop(bg); err != nil {
				t.Fatal(err)
			}
		}},
		{"starts once, even after stop", func(t *testing.T, s *loop) {
			close(s.release)
			if err := s.Start(bg); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(bg); !errors.Is(err, ErrStarted) {
				t.Fatalf("second Start: %v, want ErrStarted", err)
			}
			if err := s.Stop(bg); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(bg); !errors.Is(err, ErrStarted) {
				t.Fatalf("Start after Stop: %v, want ErrStarted", err)
			}
		}},
		{"stop ends the run's context with ErrStop and waits", func(t *testing.T, s *loop) {
			started, stopped := s.Started(), s.Stopped() // taken before Start
			if err := s.Start(bg); err != nil {
				t.Fatal(err)
			}
			wait(t, started, "Started")
			go func() { time.Sleep(10 * time.Millisecond); close(s.release) }()
			if err := s.Stop(bg); err != nil {
				t.Fatal(err)
			}
			if !closed(stopped) {
				t.Fatal("Stop returned before Stopped was closed")
			}
			if !errors.Is(s.cause, ErrStop) {
				t.Fatalf("cause %v, want ErrStop", s.cause)
			}
		}},
		{"stop bounded by its ctx; a later stop waits for the same one", func(t *testing.T, s *loop) {
			if err := s.Start(bg); err != nil {
				t.Fatal(err)
			}
			if err := s.Stop(cancelled); !errors.Is(err, context.Canceled) {
				t.Fatalf("Stop with an ended ctx: %v, want context.Canceled", err)
			}
			if closed(s.Stopped()) {
				t.Fatal("stopped although the service has not returned")
			}
			short, cancel := context.WithTimeout(bg, 20*time.Millisecond)
			defer cancel()
			if err := s.Stop(short); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Stop: %v, want context.DeadlineExceeded", err)
			}
			close(s.release)
			if err := s.Stop(bg); err != nil {
				t.Fatal(err)
			}
			if err := s.Stop(bg); err != nil {
				t.Fatalf("Stop of a stopped service: %v, want nil", err)
			}
		}},
		{"stop from many goroutines at once", func(t *testing.T, s *loop) {
			if err := s.Start(bg); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = s.Stop(bg) }()
			}
			close(s.release)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("Stop %d: %v", i, err)
				}
			}
		}},
		{"an aborted start is not started", func(t *testing.T, s *loop) {
			s.failNext = true
			if err := s.Start(bg); err == nil {
				t.Fatal("Start did not fail")
			}
			if err := s.Stop(bg); !errors.Is(err, ErrNotStarted) {
				t.Fatalf("Stop after a failed Start: %v, want ErrNotStarted", err)
			}
			if closed(s.Started()) || closed(s.Stopped()) {
				t.Fatal("an aborted start closed Started or Stopped")
			}
			close(s.release)
			if err := s.Start(bg); err != nil {
				t.Fatalf("Start after a failed one: %v", err)
			}
			wait(t, s.Started(), "Started")
			if err := s.Stop(bg); err != nil {
				t.Fatal(err)
			}
		}},
		{"the start ctx's values reach the run, its end does not stop it", func(t *testing.T, s *loop) {
			type key struct{}
			ctx, cancel := context.WithCancel(context.WithValue(bg, key{}, "v"))
			run, err := s.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			if run.Context().Err() != nil {
				t.Fatal("the start ctx's end ended the run")
			}
			if run.Context().Value(key{}) != "v" {
				t.Fatal("the start ctx's value is lost")
			}
			stopped, err := s.RequestStop()
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(context.Cause(run.Context()), ErrStop) {
				t.Fatalf("cause %v, want ErrStop", context.Cause(run.Context()))
			}
			if closed(stopped) {
				t.Fatal("stopped before the run said so")
			}
			run.Stopped()
			wait(t, stopped, "RequestStop's channel")
			wait(t, s.Started(), "Started (closed by Stopped)")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newLoop())
		})
	}
}
