package testutil

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every connection by echoing what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func dialProxy(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back, returning how long that took.
func roundTrip(t *testing.T, c net.Conn, msg []byte) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("read back %d bytes that differ from what was written", len(got))
	}
	return time.Since(start)
}

// Latency and bandwidth are lower bounds on what an exchange takes (upper
// bounds would depend on the machine's load); Cut holds data back and
// Restore delivers it, in order.
func TestProxy(t *testing.T) {
	p := NewProxy(t, echoServer(t))
	c := dialProxy(t, p)
	roundTrip(t, c, []byte("warm up"))

	t.Run("latency", func(t *testing.T) {
		p.SetLatency(100 * time.Millisecond)
		defer p.SetLatency(0)
		// Two one-way delays each way: client to echo server and back.
		if d := roundTrip(t, c, []byte("ping")); d < 200*time.Millisecond {
			t.Errorf("round trip took %s with 100ms latency each way; want at least 200ms", d)
		}
		// Chunks written 50ms apart are each delayed by the latency, not by
		// the sum of the latencies before them.
		start := time.Now()
		for range 4 {
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 350*time.Millisecond {
			t.Errorf("the last of 4 pipelined chunks came back after %s; want at least 150ms + 200ms", d)
		}
	})

	t.Run("bandwidth", func(t *testing.T) {
		p.SetBandwidth(64 << 10)
		defer p.SetBandwidth(0)
		// 64 KiB at 64 KiB/s: at least about a second in each direction, less
		// the first chunk, which is sent at once.
		if d := roundTrip(t, c, bytes.Repeat([]byte("b"), 64<<10)); d < 500*time.Millisecond {
			t.Errorf("64 KiB round trip at 64 KiB/s took %s; want at least 500ms", d)
		}
	})

	t.Run("cut holds data until restore", func(t *testing.T) {
		p.Cut()
		if _, err := c.Write([]byte("held")); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if n, err := c.Read(buf); err == nil {
			t.Fatalf("read %q through a cut proxy", buf[:n])
		}
		// A new connection waits too, and is not refused.
		c2 := dialProxy(t, p)
		if _, err := c2.Write([]byte("new")); err != nil {
			t.Fatal(err)
		}
		p.Restore()
		if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "held" {
			t.Fatalf("after restore read %q, %v; want the held bytes", buf, err)
		}
		if err := c2.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 3)
		if _, err := io.ReadFull(c2, got); err != nil || string(got) != "new" {
			t.Fatalf("the connection made during the cut read %q, %v after restore", got, err)
		}
	})
}
