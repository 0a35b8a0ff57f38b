package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/workq/workq/internal/testdb"
)

func TestNewAndStartRefuseWithoutTokens(t *testing.T) {
	pool := testdb.Pool(t)
	if _, err := newServer(t, setup{pool: pool}); !errors.Is(err, ErrNoTokens) {
		t.Fatalf("New without tokens: %v, want ErrNoTokens", err)
	}
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		s, err := newServer(t, setup{pool: pool, Options: Options{Insecure: true, Addr: addr, Logger: testLogger(t)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); !errors.Is(err, ErrNoTokens) {
			t.Fatalf("Start insecure on %s: %v, want ErrNoTokens", addr, err)
		}
	}
	s, err := newServer(t, setup{pool: pool, Options: Options{Insecure: true, Addr: "127.0.0.1:0", Logger: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start insecure on loopback: %v", err)
	}
	res, err := http.Get("http://" + s.Addr().String() + "/v1/queues")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("insecure request: %d", res.StatusCode)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

// TestStopWaitsForRequestsInFlight: Stop lets a request in flight finish,
// and when its context ends first it returns instead of waiting on.
func TestStopWaitsForRequestsInFlight(t *testing.T) {
	pool := testdb.Pool(t)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	s, err := newServer(t, setup{pool: pool, Options: Options{Insecure: true, Addr: "127.0.0.1:0", Logger: testLogger(t),
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			entered <- struct{}{}
			<-release
			_, _ = io.WriteString(w, "done")
		})}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	url := "http://" + s.Addr().String() + "/metrics"
	got := make(chan int, 1)
	go func() {
		res, err := http.Get(url)
		if err != nil {
			got <- -1
			return
		}
		res.Body.Close()
		got <- res.StatusCode
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a request was in flight", err)
	case <-time.After(100 * time.Millisecond): // Stop must still be waiting
	}
	close(release)
	if code := <-got; code != 200 {
		t.Fatalf("the request in flight got %d", code)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}

	// A request that never ends: Stop gives up when its context does.
	s2, err := newServer(t, setup{pool: pool, Options: Options{Insecure: true, Addr: "127.0.0.1:0", Logger: testLogger(t),
		Metrics: http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-r.Context().Done() // ends when Stop closes the connection
		})}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	go func() {
		if res, err := http.Get("http://" + s2.Addr().String() + "/metrics"); err == nil {
			res.Body.Close()
		}
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s2.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with a stuck request: %v, want context.DeadlineExceeded", err)
	}
}
